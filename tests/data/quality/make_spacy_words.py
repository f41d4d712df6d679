"""Labels tests/data/quality/spacy_words.json: datatrove's own English word tokenizer
(spaCy's rule-based one) on tricky strings, run once in datatrove's venv, before and apart from
shardforge's code:

    .bench-venvs/datatrove/bin/python tests/data/quality/make_spacy_words.py
"""
import json
from pathlib import Path

from importlib.metadata import version

from datatrove.utils.text import PUNCTUATION_SET, split_into_words

TEXTS = [
    "Don't stop: it's the U.S. economy, e.g. the Fed's rate (5.25%), isn't it?",
    "Mr. Smith met Dr. Jones at 3:30pm on Jan. 5th, 2024 -- 10km away; cost: $1,000.50.",
    "She said \"hello\"... then left… «Bonjour» 'quoted' ‘curly’ “double” „low“",
    "e-mail state-of-the-art co-operate x=y a/b foo.Bar 2024-01-01 1/2 a+b C++ C# F#",
    "See http://example.org/a?b=1&c=2#frag, www.debian.org and mail me at jo@ex.com.",
    "Dont cannot gonna gotta Im Ive wont cant Lets y'all ma'am o'clock rock'n'roll O'Neil",
    "print('x'.join([c for c in s])) def f(a, b=1): return a->b; std::vector<int> v{1,2};",
    "libs/vmd/test/test_assert.cxx /etc/systemd/*.conf.d/. man(7), argv[1]) <helmutg@debian.org>",
    "'19:2B:3E:C3:B3:5B:32:E8' [reservationsfromfile=PATH|[dest=[machinetype=X],[m]]]",
    "=====  *****  ----  ::  ;;  ?!  !!!  ...  ''  ``  ):  :)  :-)  <3  ¯\\_(ツ)_/¯  (:  ;)",
    "s = ''.join(x) ; d['key'] = \"v\" ; x.__str__() ; 'str's ; ):\tEnter",
    "naïve Ünïcödé café Straße 東京は大きい。 Привет, мир! ¿Qué tal? ¡Hola! résumé—done–ok",
    "tabs\tand\u00a0non-breaking\u2028line\u2029para\r\nwindows\x0bvt  double  spaces\n\n\n",
    "#hashtag @user 100% 50°C 3.5GB 12kg 5ft $5 £3 €2 ¥1 1st 2nd 3rd 4th 90s '90s",
    "U.K. U.N. Ph.D. a.m. p.m. etc. i.e. vs. Inc. Ltd. St. No. Vol. fig. approx. Sept.",
    "- bullet one\n• bullet two\n* bullet three\n1. first\n(a) item\n[1] cite [edit] [citation needed]",
    "He's, she'll, they'd, we're, you've, I'm, it'd've, shouldn't've, y'know, 'tis, 'em",
    "(e.g. this) [i.e. that] {etc.} \"U.S.\" 'Mr.' (Dr.) x.y.z. a.b 3.14.15 v1.2.3 ~/.bashrc",
    "",
    "   \n\t  ",
]

if __name__ == "__main__":
    # one case per line: the text, its words, and which of them are symbol words for Gopher's
    # quality rules (datatrove: every character in PUNCTUATION_SET)
    cases = []
    for t in TEXTS:
        words = split_into_words(t, "en")
        cases.append(json.dumps({"text": t, "words": words,
                                 "symbol": [all(ch in PUNCTUATION_SET for ch in w) for w in words]},
                                ensure_ascii=False))
    head = json.dumps(f"datatrove {version('datatrove')} split_into_words(text, 'en'), spacy {version('spacy')}")
    Path(__file__).with_name("spacy_words.json").write_text(
        '{"labelled_by": ' + head + ',\n "cases": [\n  ' + ",\n  ".join(cases) + "\n]}\n", encoding="utf-8")
