"""The clean stage family: text normalisation, language identification and the quality rules (quality/)."""
