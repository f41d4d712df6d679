"""What a run records of its config: the part reports, manifests and stage fingerprints
hold. Secrets are emptied here, and the pseudonymisation key is named by its key id (resolved
by the redact package, `shardforge.redact.privacy`)."""
from __future__ import annotations

import dataclasses
from typing import Any

from shardforge.config import Config
from shardforge.redact.privacy import key_id, resolve_pseudonym_key


def recorded_config(cfg: Config) -> dict[str, Any]:
    """What a run's report, a build's manifest and a stage's fingerprint record of the config:
    everything but where it ran (`[spark]`) and its paths (`pipeline.input`, `urls`,
    `output`), with every field marked secret emptied. The pseudonymisation key in use is
    named by its key id (`redact.pseudonym_key_id`), whichever way it was given."""
    d = cfg.to_dict()
    d.pop("spark", None)
    for k in ("input", "urls", "output"):
        d["pipeline"].pop(k, None)
    for section in dataclasses.fields(cfg):
        for f in dataclasses.fields(getattr(cfg, section.name)):
            if f.metadata.get("secret") and section.name in d:
                d[section.name][f.name] = ""
    if cfg.redact.mode == "pseudonym":
        d["redact"]["pseudonym_key_id"] = key_id(resolve_pseudonym_key(cfg.redact))
    # the libraries whose versions decide output text: recorded (in reports and manifests) and
    # fingerprinted (a new version reruns the stage)
    d["ingest"]["html_extractor"] = _library("resiliparse")
    if cfg.clean.detect_language:
        d["clean"]["language_identifier"] = _library("py3langid")
    if cfg.score.models:
        from shardforge.score.model import BINDING

        d["score"]["scorer"] = _library(BINDING)
    return d


def _library(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{name} {version(name)}"
    except PackageNotFoundError:
        return f"{name} (not installed)"
