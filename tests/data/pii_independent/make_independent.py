"""Builds the independent labeled PII set (deterministic: same files, same bytes).

    python tests/data/pii_independent/make_independent.py   # writes independent.jsonl here

Text the detectors were not developed on: windows of Debian's Python 3.11
documentation (windows.jsonl, cut by extract_windows.py; the natural PII and hard
negatives in them were labeled by hand in natural.tsv) and mailing-list messages
composed here that quote those windows. Into them go planted values whose formats
and contexts are written below from the formats' own rules (NANP and national
numbering plans, the IBAN registry's BBAN layouts, card issuer ranges, the SSA's
SSN rules, providers' token formats), not from lib/pii, and hard negatives of the
kinds issue 17 names: 4-part versions in version contexts, documentation and other
reserved address ranges, SSN- and phone-shaped numbers that their numbering rules
rule out, and 40-character strings that look like AWS secret keys but are not.

Each line: {"id", "group", "source", "text", "spans": [[start, end, KIND]],
"negatives": [[start, end, "neg:<type>"]]}. The labels were written, and this file
committed, before any detector was run on it.
"""
from __future__ import annotations

import base64
import importlib.util
import ipaddress
import json
import random
import string
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = ("EMAIL", "IP_ADDRESS", "PHONE", "CREDIT_CARD", "US_SSN", "IBAN", "KEY")
NEG_TYPES = ("version4", "doc_range_ip", "reserved_ip", "ssn_invalid", "phone_invalid", "aws_like")
MESSAGES = 320
B62 = string.ascii_letters + string.digits
B64 = B62 + "+/"


def _dev_generator():
    """The development set's generator, for its span-tracking `Doc`."""
    spec = importlib.util.spec_from_file_location("pii_make_labeled", HERE.parent / "pii" / "make_labeled.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Text(_dev_generator().Doc):
    """Text built piece by piece; a piece may carry a label (a kind or neg:<type>),
    kept in `spans`. `extend` appends another Text, shifting its labels."""

    def extend(self, other: "Text") -> "Text":
        for s, e, label in other.spans:
            self.spans.append([s + self.n, e + self.n, label])
        self.parts.extend(other.parts)
        self.n += other.n
        return self


def line(*pieces) -> Text:
    """A Text from pieces: plain strings, or (value, label) pairs."""
    t = Text()
    for p in pieces:
        if isinstance(p, tuple):
            t.add(*p)
        else:
            t.add(p)
    return t


def digits(rng, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def pattern(rng, pat: str) -> str:
    """'#' is any digit, 'N' a digit 2-9, 'P' a digit 1-9; other characters stay."""
    out = []
    for ch in pat:
        out.append(rng.choice(string.digits) if ch == "#" else rng.choice("23456789") if ch == "N"
                   else rng.choice("123456789") if ch == "P" else ch)
    return "".join(out)


# --- people and places ----------------------------------------------------------
GIVEN = ["Anneli", "Bogdan", "Carmen", "Dmitri", "Efua", "Farid", "Greta", "Hiroshi", "Ilse", "Jovan", "Kalani",
         "Leilani", "Mateus", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Soren", "Tamar", "Ugo", "Vesna",
         "Wanjiru", "Xavier", "Yusuf", "Zofia", "Aurelio", "Birgit", "Chidi", "Dagny"]
FAMILY = ["Abernathy", "Baptiste", "Castellanos", "Dvorak", "Eriksen", "Fontaine", "Gunawardena", "Halvorsen",
          "Ibrahimovic", "Jankowski", "Kuznetsova", "Lindgren", "Magnusson", "Nakamura", "Oyelaran", "Papadopoulos",
          "Quintero", "Rasmussen", "Sokolov", "Thorsen", "Uchida", "Villanueva", "Wojcik", "Yamamoto", "Zielinski"]
MAIL_DOMAINS = ["posteo.de", "web.de", "gmx.at", "orange.fr", "free.fr", "btinternet.com", "virginmedia.com",
                "comcast.net", "verizon.net", "icloud.com", "hotmail.co.uk", "libero.it", "telenet.be", "xs4all.nl",
                "uni-heidelberg.de", "cs.ox.ac.uk", "eecs.berkeley.edu", "ethz.ch", "kth.se", "u-tokyo.ac.jp",
                "northwindlabs.io", "quarry-analytics.com", "bluefinch.dev", "helix-robotics.eu", "tidewater.org",
                "lists.opencollab.org", "mail.riverbend-health.com", "fastmail.fm", "zoho.eu", "tuta.io"]
CITIES = ["Lyon", "Leeds", "Graz", "Porto", "Tartu", "Osaka", "Recife", "Pune", "Perth", "Cork", "Durban"]
WORDS = ["river", "meadow", "copper", "lantern", "harbor", "quartz", "falcon", "ember", "willow", "summit", "cobalt",
         "orchid", "granite", "tundra", "saffron", "pylon", "beacon", "marble", "cinder", "juniper"]


def name(rng) -> str:
    return f"{rng.choice(GIVEN)} {rng.choice(FAMILY)}"


# --- positive values ----------------------------------------------------------------
def email(rng) -> str:
    g, f = rng.choice(GIVEN), rng.choice(FAMILY)
    local = rng.choice([f"{g}.{f}", f"{g[0]}{f}", f"{g}{f[0]}", f"{g}_{f}", f"{f}.{g}{rng.randint(2, 98)}",
                        f"{g}-{f}", f"{g}+{rng.choice(WORDS)}", f"{g[0]}.{f}", f"{f}{rng.randint(1960, 2005)}"])
    if rng.random() < 0.7:
        local = local.lower()
    return f"{local}@{rng.choice(MAIL_DOMAINS)}"


def public_ipv4(rng) -> str:
    while True:
        a = ipaddress.IPv4Address(rng.getrandbits(32))
        o = str(a).split(".")
        if a.is_global and not a.is_multicast and o[3] not in ("0", "255") and not (o[2] == "0" and o[3] == "0"):
            return str(a)


V6_PREFIXES = ["2001:4860", "2a00:1450", "2606:4700", "2620:fe", "2a03:2880", "2400:cb00", "2a01:4f8", "2604:a880",
               "2a02:c207", "2001:67c", "2c0f:fb50", "2405:200", "2804:14c"]


def public_ipv6(rng) -> str:
    head = rng.choice(V6_PREFIXES).split(":")
    groups = head + [f"{rng.getrandbits(16):x}" for _ in range(8 - len(head))]
    if rng.random() < 0.4:
        groups[4:7] = ["0", "0", "0"]
    addr = ipaddress.IPv6Address(":".join(groups))
    assert addr.is_global, addr
    return addr.exploded if rng.random() < 0.15 else str(addr)


def nanp(rng) -> str:
    while True:
        npa = f"{rng.choice('23456789')}{rng.choice('012345678')}{rng.choice(string.digits)}"
        if npa[1:] == "11" or npa[:2] in ("37", "96"):
            continue
        nxx = f"{rng.choice('23456789')}{digits(rng, 2)}"
        line_ = digits(rng, 4)
        if nxx[1:] == "11" or (nxx == "555" and line_.startswith("01")):
            continue
        break
    return rng.choice([f"({npa}) {nxx}-{line_}", f"{npa}-{nxx}-{line_}", f"{npa}.{nxx}.{line_}", f"{npa} {nxx} {line_}",
                       f"+1 {npa} {nxx} {line_}", f"+1-{npa}-{nxx}-{line_}", f"1-{npa}-{nxx}-{line_}",
                       f"+1 ({npa}) {nxx}-{line_}", f"+1.{npa}.{nxx}.{line_}", f"+1{npa}{nxx}{line_}"])


# national significant numbers in the plans' usual written groups
NATIONAL = {
    "33": ["6 ## ## ## ##", "7 ## ## ## ##", "1 ## ## ## ##", "4 ## ## ## ##"],
    "44": ["20 #### ####", "7P## ######", "161 ### ####", "131 ### ####"],
    "49": ["30 ########", "15P ########", "89 #### ####", "221 ### ####"],
    "81": ["3-####-####", "90-####-####", "6-####-####", "80-####-####"],
    "61": ["2 #### ####", "4## ### ###", "3 #### ####", "8 #### ####"],
    "55": ["11 9####-####", "21 ####-####", "31 9####-####"],
    "91": ["9#### #####", "80 #### ####", "22 #### ####", "7#### #####"],
    "86": ["13# #### ####", "10 #### ####", "21 #### ####", "18# #### ####"],
    "34": ["6## ### ###", "91 ### ## ##", "93 ### ## ##"],
    "39": ["06 #### ####", "3## ### ####", "02 #### ####"],
    "31": ["6 ########", "20 ### ####", "10 ### ####"],
    "41": ["44 ### ## ##", "7P ### ## ##", "31 ### ## ##"],
    "46": ["8 ### ### ##", "7P-### ## ##"],
    "52": ["55 #### ####", "33 #### ####", "81 #### ####"],
    "65": ["6### ####", "8### ####", "9### ####"],
    "852": ["2### ####", "9### ####"],
    "353": ["1 ### ####", "8P ### ####"],
    "27": ["21 ### ####", "8P ### ####", "11 ### ####"],
    "7": ["495 ###-##-##", "9## ###-##-##", "812 ###-##-##"],
    "48": ["22 ### ## ##", "5## ### ###", "6## ### ###"],
    "82": ["2-####-####", "10-####-####"],
    "90": ["212 ### ## ##", "5## ### ## ##"],
    "971": ["4 ### ####", "5P ### ####"],
    "64": ["9 ### ####", "21 ### ####"],
    "45": ["## ## ## ##"],
    "47": ["### ## ###", "## ## ## ##"],
}
TRUNK_ZERO = ("44", "49", "41", "31", "39")     # written "+44 (0)20 ..." in some signatures


def international(rng) -> str:
    cc = rng.choice(sorted(NATIONAL))
    nsn = pattern(rng, rng.choice(NATIONAL[cc]))
    if nsn[0] == "0" and cc != "39":
        nsn = "2" + nsn[1:]
    r = rng.random()
    if r < 0.12:
        return "+" + cc + "".join(ch for ch in nsn if ch.isdigit())
    if r < 0.22:
        return f"00{cc} {nsn}" if rng.random() < 0.5 else f"00 {cc} {nsn}"
    if r < 0.3 and cc in TRUNK_ZERO and cc != "39":
        return f"+{cc} (0){nsn}"
    return f"+{cc} {nsn}"


def phone(rng) -> str:
    return nanp(rng) if rng.random() < 0.5 else international(rng)


def luhn_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d *= 2
            d = d - 9 if d > 9 else d
        total += d
    return str((10 - total % 10) % 10)


CARD_BRANDS = [("4", 16, "4"), ("4", 19, "4"), ("51-55", 16, "4"), ("2221-2720", 16, "4"), ("34|37", 15, "465"),
               ("6011", 16, "4"), ("644-649", 16, "4"), ("65", 16, "4"), ("3528-3589", 16, "4"), ("36", 14, "464"),
               ("62", 16, "4"), ("62", 19, "4")]


def card(rng) -> str:
    spec, length, grouping = rng.choice(CARD_BRANDS)
    if "|" in spec:
        prefix = rng.choice(spec.split("|"))
    elif "-" in spec:
        lo, hi = spec.split("-")
        prefix = str(rng.randint(int(lo), int(hi)))
    else:
        prefix = spec
    body = prefix + digits(rng, length - len(prefix) - 1)
    number = body + luhn_digit(body)
    if len(set(number)) <= 3:
        return card(rng)
    sep = rng.choice([" ", " ", "-", ""])
    if grouping == "465":
        groups = [number[:4], number[4:10], number[10:]]
    elif grouping == "464":
        groups = [number[:4], number[4:10], number[10:]]
    else:
        groups = [number[i:i + 4] for i in range(0, len(number), 4)]
    return sep.join(groups)


SSN_EXAMPLES = {"078051120", "219099999", "123456789", "457555462"}


def ssn_digits(rng) -> str:
    while True:
        area = rng.randint(1, 899)
        d = f"{area:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}"
        if area != 666 and d not in SSN_EXAMPLES:
            return d


# BBAN layouts from the IBAN registry: n digits, a upper-case letters, c alphanumerics
BBAN = {"DE": "18n", "FR": "10n11c2n", "GB": "4a14n", "ES": "20n", "IT": "1a10n12c", "NL": "4a10n", "BE": "12n",
        "CH": "5n12c", "AT": "16n", "PL": "24n", "SE": "20n", "DK": "14n", "FI": "14n", "NO": "11n", "PT": "21n",
        "IE": "4a14n", "LU": "3n13c", "CZ": "20n", "SK": "20n", "HU": "24n", "RO": "4a16c", "BG": "4a6n8c",
        "HR": "17n", "SI": "15n", "GR": "7n16c", "LT": "16n", "LV": "4a13c", "EE": "16n", "IS": "22n", "MT": "4a5n18c",
        "CY": "8n16c", "SA": "2n18c", "AE": "3n16n", "IL": "19n", "TR": "5n1n16c", "BR": "23n1a1c"}


def iban(rng) -> str:
    cc = rng.choice(sorted(BBAN))
    bban, num = "", ""
    for ch in BBAN[cc]:
        if ch.isdigit():
            num += ch
            continue
        alphabet = {"n": string.digits, "a": string.ascii_uppercase, "c": string.ascii_uppercase + string.digits}[ch]
        bban += "".join(rng.choice(alphabet) for _ in range(int(num)))
        num = ""
    as_number = "".join(str(int(c, 36)) for c in bban + cc + "00")
    raw = f"{cc}{98 - int(as_number) % 97:02d}{bban}"
    if rng.random() < 0.5:
        return " ".join(raw[i:i + 4] for i in range(0, len(raw), 4))
    return raw


def random_secret(rng) -> str:
    return rng.choice(B62) + _secret_rest(rng)


def _secret_rest(rng) -> str:
    r = rng.random()
    if r < 0.35:
        return "".join(rng.choice(B62) for _ in range(rng.randint(24, 48)))
    if r < 0.6:
        return "".join(rng.choice(string.hexdigits[:16]) for _ in range(rng.choice([32, 40, 64])))
    if r < 0.8:
        return "".join(rng.choice(B62 + "!#%^*-_+") for _ in range(rng.randint(14, 28)))
    w = rng.sample(WORDS, 2)
    return f"{w[0].capitalize()}{rng.choice('!#%*-')}{rng.randint(10, 9999)}{w[1].capitalize()}{rng.choice('!?&')}"


def jwt(rng) -> str:
    def enc(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()
    head = enc({"typ": "JWT", "alg": rng.choice(["HS256", "HS512", "RS256", "ES384"])})
    claims = {"iss": f"https://auth.{rng.choice(MAIL_DOMAINS)}", "sub": str(rng.randint(10 ** 5, 10 ** 9)),
              "exp": rng.randint(1_700_000_000, 1_900_000_000)}
    sig = "".join(rng.choice(B62 + "-_") for _ in range(rng.choice([43, 86, 342])))
    return f"{head}.{enc(claims)}.{sig}"


def aws_secret(rng) -> str:
    return "".join(rng.choice(B64) for _ in range(40))


def provider_token(rng) -> str:
    k = rng.randrange(9)
    upper = string.ascii_uppercase + "234567"
    if k == 0:
        return rng.choice(["AKIA", "ASIA"]) + "".join(rng.choice(upper) for _ in range(16))
    if k == 1:
        return rng.choice(["ghp_", "gho_", "ghs_", "ghr_"]) + "".join(rng.choice(B62) for _ in range(36))
    if k == 2:
        return "github_pat_" + "".join(rng.choice(B62) for _ in range(22)) + "_" + "".join(rng.choice(B62) for _ in range(59))
    if k == 3:
        return "glpat-" + "".join(rng.choice(B62 + "-_") for _ in range(20))
    if k == 4:
        return f"xox{rng.choice('bp')}-{digits(rng, 12)}-{digits(rng, 13)}-" + "".join(rng.choice(B62) for _ in range(24))
    if k == 5:
        return "AIza" + "".join(rng.choice(B62 + "-_") for _ in range(35))
    if k == 6:
        return rng.choice(["sk_live_", "rk_live_", "sk_test_"]) + "".join(rng.choice(B62) for _ in range(rng.choice([24, 34, 99])))
    if k == 7:
        return jwt(rng)
    return "AKIA" + "".join(rng.choice(upper) for _ in range(16))


def pem_block(rng) -> str:
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "ENCRYPTED PRIVATE KEY"])
    body = base64.b64encode(bytes(rng.getrandbits(8) for _ in range(rng.randint(120, 400)))).decode()
    lines = [body[i:i + 64] for i in range(0, len(body), 64)]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


# --- positive lines: each returns a Text holding one planted value ------------------
def pos_line(kind: str, rng) -> Text:
    n = name(rng)
    if kind == "EMAIL":
        v = (email(rng), "EMAIL")
        return rng.choice([line("Reported-by: ", n, " <", v, ">"), line("Signed-off-by: ", n, " <", v, ">"),
                           line("For questions, write to ", v, "."), line("# maintainer: ", v),
                           line('    author_email="', v, '",'), line(n, ",", v, ",", rng.choice(CITIES)),
                           line("cc ", v), line("  ", v), line(f"{n} <", v, "> wrote:")])
    if kind == "IP_ADDRESS":
        ip = public_ipv6(rng) if rng.random() < 0.3 else public_ipv4(rng)
        v = (ip, "IP_ADDRESS")
        forms = [line("sshd[", str(rng.randint(300, 40000)), "]: Failed password for invalid user admin from ", v,
                      " port ", str(rng.randint(1024, 65535)), " ssh2"),
                 line(v, ' - - [12/Mar/2024:10:22:31 +0000] "GET /index.html HTTP/1.1" 200 5120'),
                 line('    upstream_host = "', v, '"'), line("# ", v), line("nameserver ", v),
                 line("iptables -A INPUT -s ", v, " -j DROP"), line("X-Originating-IP: [", v, "]"),
                 line("The box at ", v, " stopped answering pings last night."), line("    ('", v, "', 8080),")]
        if ":" not in ip:
            forms += [line("Received: from mx2.", rng.choice(MAIL_DOMAINS), " (mx2 [", v, "])"),
                      line("connect to ", v, ":443 failed: Connection refused")]
        else:
            forms += [line("curl -6 https://[", v, "]:8443/healthz")]
        return rng.choice(forms)
    if kind == "PHONE":
        v = (phone(rng), "PHONE")
        return rng.choice([line("Phone: ", v), line("Tel. ", v), line("Mobile: ", v), line("call me on ", v, " after six"),
                           line("# ", v), line(n, ",", v, ",", rng.choice(CITIES)), line('    "phone": "', v, '",'),
                           line("fax ", v), line("  ", v, "  (office)"), line("Reach the on-call engineer at ", v, ".")])
    if kind == "CREDIT_CARD":
        v = (card(rng), "CREDIT_CARD")
        exp = f"{rng.randint(1, 12):02d}/{rng.randint(25, 31)}"
        return rng.choice([line("Card number: ", v), line("PAN ", v, " exp ", exp), line('    "card_number": "', v, '",'),
                           line("I was charged twice on ", v, " yesterday."), line("# ", v),
                           line(n, ",", v, ",", exp), line("card=", v, "&amount=19.99")])
    if kind == "US_SSN":
        d = ssn_digits(rng)
        r = rng.random()
        if r < 0.12:
            return rng.choice([line("SSN ", (d, "US_SSN")), line("social security number: ", (d, "US_SSN"))])
        sep = " " if r < 0.27 else "-"
        v = (f"{d[:3]}{sep}{d[3:5]}{sep}{d[5:]}", "US_SSN")
        return rng.choice([line("# ", v), line(n, ",", v, ",", f"{rng.randint(1950, 2004)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"),
                           line("SSN: ", v), line("Social Security Number: ", v), line('    ssn = "', v, '"'),
                           line("my social is ", v, ", please update the form"), line("  ", v)])
    if kind == "IBAN":
        v = (iban(rng), "IBAN")
        return rng.choice([line("IBAN: ", v), line("IBAN ", v, " (BIC ", rng.choice(["COBADEFFXXX", "BNPAFRPP", "INGBNL2A"]), ")"),
                           line("Kontoinhaber: ", n, ", IBAN ", v), line("please wire the deposit to ", v),
                           line('    iban = "', v, '"'), line("# ", v), line(n, ";", v, ";EUR")])
    # KEY
    r = rng.random()
    if r < 0.3:
        t = provider_token(rng)
        v = (t, "KEY")
        if t.startswith("eyJ"):
            return line("Authorization: Bearer ", v)
        return rng.choice([line("export GITHUB_TOKEN=", v), line("    token: ", v), line("leaked in the CI log: ", v),
                           line("  ", v), line("# ", v)])
    if r < 0.5:
        v = (random_secret(rng), "KEY")
        return rng.choice([line('DB_PASSWORD="', v, '"'), line("client_secret: ", v), line("    api_key = '", v, "'"),
                           line("AUTH_TOKEN=", v), line('SECRET_KEY = "', v, '"'), line("access_token: ", v),
                           line("--password ", v), line('    "password": "', v, '",')])
    if r < 0.62:
        pw = "".join(rng.choice(B62) for _ in range(rng.randint(12, 24)))
        return line(rng.choice(["postgresql", "mysql", "redis", "amqp"]), "://", rng.choice(["app", "svc_backup", "root"]), ":",
                    (pw, "KEY"), "@db", str(rng.randint(1, 9)), ".", rng.choice(MAIL_DOMAINS), "/prod")
    if r < 0.72:
        return line((pem_block(rng), "KEY"))
    if r < 0.9:
        v = (aws_secret(rng), "KEY")
        return rng.choice([line(v), line("    ", v), line("# ", v), line('"', v, '",')])
    kid = "AKIA" + "".join(rng.choice(string.ascii_uppercase + "234567") for _ in range(16))
    return line((kid, "KEY"), ",", (aws_secret(rng), "KEY"))


# --- hard negative lines ----------------------------------------------------------------
def public_quad(rng) -> str:
    """A 4-part version that is also a public IPv4 address (so only its context says version)."""
    while True:
        v = f"{rng.randint(1, 40)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}.{rng.randint(1, 250)}"
        a = ipaddress.IPv4Address(v)
        if a.is_global and not a.is_multicast:
            return v


DOC_V4 = ["192.0.2.", "198.51.100.", "203.0.113."]
RESERVED_V4 = ["10.{}.{}.{}", "172.{}.{}.{}", "192.168.{}.{}", "127.0.0.{}", "169.254.{}.{}", "100.{}.{}.{}",
               "198.18.{}.{}", "224.0.0.{}", "239.{}.{}.{}", "240.{}.{}.{}"]


def reserved_ip(rng) -> str:
    r = rng.random()
    if r < 0.8:
        pat = rng.choice(RESERVED_V4)
        vals = []
        for i in range(pat.count("{}")):
            vals.append(rng.randint(1, 254))
        if pat.startswith("172."):
            vals[0] = rng.randint(16, 31)
        if pat.startswith("100."):
            vals[0] = rng.randint(64, 127)
        return pat.format(*vals)
    return rng.choice([f"fd{rng.getrandbits(8):02x}:{rng.getrandbits(16):x}:{rng.getrandbits(16):x}::{rng.getrandbits(16):x}",
                       f"fe80::{rng.getrandbits(16):x}:{rng.getrandbits(16):x}:{rng.getrandbits(16):x}:{rng.getrandbits(16):x}",
                       "::1", f"ff02::{rng.randint(1, 9)}"])


def doc_ip(rng) -> str:
    if rng.random() < 0.75:
        return rng.choice(DOC_V4) + str(rng.randint(1, 254))
    return f"2001:db8:{rng.getrandbits(16):x}::{rng.getrandbits(16):x}" if rng.random() < 0.6 else f"2001:db8::{rng.randint(1, 255)}"


def invalid_ssn(rng) -> str:
    d = ssn_digits(rng)
    r = rng.randrange(6)
    if r == 0:
        d = "000" + d[3:]
    elif r == 1:
        d = "666" + d[3:]
    elif r == 2:
        d = f"9{rng.randint(0, 99):02d}" + d[3:]
    elif r == 3:
        d = d[:3] + "00" + d[5:]
    elif r == 4:
        d = d[:5] + "0000"
    else:
        d = rng.choice(sorted(SSN_EXAMPLES))
    return f"{d[:3]}-{d[3:5]}-{d[5:]}"


def invalid_phone(rng) -> str:
    line_ = digits(rng, 4)
    r = rng.randrange(9)
    if r == 0:
        return f"({rng.choice('01')}{digits(rng, 2)}) {rng.choice('23456789')}{digits(rng, 2)}-{line_}"   # no such area code
    if r == 1:
        return f"({rng.choice('23456789')}11) {rng.choice('23456789')}{digits(rng, 2)}-{line_}"            # N11
    if r == 2:
        return f"{rng.choice('23456789')}9{rng.randint(0, 9)}-{rng.choice('23456789')}{digits(rng, 2)}-{line_}"   # N9X
    if r == 3:
        return f"{rng.choice('23456789')}{digits(rng, 2)}-555-01{digits(rng, 2)}"                          # fiction
    if r == 4:
        return f"{rng.choice('23456789')}{digits(rng, 2)}-{rng.choice('01')}{digits(rng, 2)}-{line_}"     # exchange 0/1
    if r == 5:
        return f"+{rng.choice(['999', '280', '801', '969', '28', '89'])} {digits(rng, 3)} {digits(rng, 4)}"  # no such country
    if r == 6:
        return rng.choice([f"+33 6 {digits(rng, 2)} {digits(rng, 2)} {digits(rng, 2)}",                   # too short
                           f"+61 4{digits(rng, 2)} {digits(rng, 3)} {digits(rng, 2)}",
                           f"+91 9{digits(rng, 3)} {digits(rng, 4)}", f"+48 {digits(rng, 3)} {digits(rng, 3)}"])
    if r == 7:
        return f"{rng.choice('23456789')}{digits(rng, 9)}"                                                   # bare digits
    return f"{rng.choice(['37', '96'])}{rng.randint(0, 9)}-{rng.choice('23456789')}{digits(rng, 2)}-{line_}"  # 37X, 96X


CAMEL = ["Abstract", "Request", "Handler", "Factory", "Bean", "Proxy", "Singleton", "Adapter", "Manager", "Service",
         "Default", "Context", "Resolver", "Provider", "Strategy", "Visitor", "Builder", "Registry", "Session", "Token"]


def aws_like(rng) -> tuple[str, str | None]:
    """(text, the 40-character value) for a string that looks like a secret key but is not."""
    r = rng.randrange(7)
    if r == 0:
        return (v := "".join(rng.choice("0123456789abcdef") for _ in range(40))), v           # git SHA-1
    if r == 1:
        return (v := "".join(rng.choice("0123456789ABCDEF") for _ in range(40))), v
    if r == 2:
        words = []
        while sum(map(len, words)) < 36:
            words.append(rng.choice(CAMEL))
        v = ("".join(words) + str(rng.randint(1000, 9999)))[:36] + str(rng.randint(1000, 9999))
        return v, v                                                                              # identifier
    if r == 3:
        v = rng.choice(["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"])
        return v, v                                                                              # documentation keys
    if r == 4:
        ch = rng.choice(string.ascii_letters)
        v = ch * 20 + rng.choice(string.digits) * 20
        return v, v
    if r == 5:
        body = base64.b64encode(bytes(rng.getrandbits(8) for _ in range(78))).decode()       # 104 chars, no padding
        cert = "-----BEGIN CERTIFICATE-----\n" + body[:64] + "\n"
        return cert + body[64:] + "\n-----END CERTIFICATE-----", body[64:]                     # a blob's last line
    blob = base64.b64encode(bytes(rng.getrandbits(8) for _ in range(90))).decode()
    return "\n".join(blob[i:i + 40] for i in range(0, 120, 40)), None                            # wrapped at 40


def neg_line(kind: str, rng) -> Text:
    if kind == "version4":
        v = (public_quad(rng), "neg:version4")
        v2 = (public_quad(rng), "neg:version4")
        return rng.choice([line("__version__ = '", v, "'"), line('VERSION = "', v, '"'), line("version: ", v),
                           line('  "version": "', v, '",'), line("<version>", v, "</version>"),
                           line('[assembly: AssemblyVersion("', v, '")]'), line('[assembly: AssemblyFileVersion("', v, '")]'),
                           line("requires foo==", v), line("    wheel>=", v), line("Version: ", v),
                           line("Firmware version ", v), line("firmware ", v, " fixes the fan curve"), line("build ", v),
                           line("release ", v), line("upgraded the agent from ", v, " to ", v2, " last week"),
                           line("Mozilla/5.0 (X11) Chrome/", v, " Safari/537.36"), line('#define APP_VERSION "', v, '"'),
                           line("version '", v, "'"), line("python_requires='>=", v, "'"), line('    "left-pad": "^', v, '"'),
                           line("ProductVersion: ", v), line("FileVersion ", v), line("PRODUCT_VERSION=", v),
                           line("fw_ver=", v), line("VERSIONS = ['3.9.1', '", v, "']")])
    if kind in ("doc_range_ip", "reserved_ip"):
        ip = doc_ip(rng) if kind == "doc_range_ip" else reserved_ip(rng)
        v = (ip, f"neg:{kind}")
        forms = [line("sshd[", str(rng.randint(300, 40000)), "]: Accepted publickey for deploy from ", v, " port 52144 ssh2"),
                 line('    upstream_host = "', v, '"'), line("# ", v), line("nameserver ", v),
                 line("iptables -A INPUT -s ", v, " -j ACCEPT"), line("The box at ", v, " stopped answering pings."),
                 line("    ('", v, "', 8080),")]
        if ":" not in ip:
            forms.append(line(v, ' - - [12/Mar/2024:10:22:31 +0000] "GET / HTTP/1.1" 200 512'))
        return rng.choice(forms)
    if kind == "ssn_invalid":
        if rng.random() < 0.25:
            d = ssn_digits(rng)
            v = (f"{d[:3]}-{d[3:5]}-{d[5:]}", "neg:ssn_invalid")
            return rng.choice([line("case no. ", v), line("Order #", v), line("ticket ", v), line("docket ", v),
                               line("part ", v, " is back-ordered"), line("invoice ", v)])
        v = (invalid_ssn(rng), "neg:ssn_invalid")
        return rng.choice([line("# ", v), line(name(rng), ",", v, ",1988-04-12"), line("SSN: ", v), line("  ", v)])
    if kind == "phone_invalid":
        if rng.random() < 0.2:
            v = (nanp(rng).lstrip("+1 -."), "neg:phone_invalid")
            return rng.choice([line("order ", v, " shipped"), line("ref ", v), line("invoice no. ", v), line("serial ", v),
                               line("ticket #", v)])
        v = (invalid_phone(rng), "neg:phone_invalid")
        return rng.choice([line("# ", v), line("Phone: ", v), line(name(rng), ",", v, ",", rng.choice(CITIES)),
                           line("call ", v, " for details"), line("  ", v)])
    text, value = aws_like(rng)
    if value is None:
        t = Text()
        for i, part in enumerate(text.split("\n")):
            t.add("\n" if i else "").add(part, "neg:aws_like")
        return t
    i = text.index(value)
    return line(text[:i], (value, "neg:aws_like"), text[i + len(value):])


# --- assembling rows ----------------------------------------------------------------
def load_windows() -> tuple[list[dict], dict[str, list[list]]]:
    windows = [json.loads(x) for x in (HERE / "windows.jsonl").read_text(encoding="utf-8").splitlines()]
    by_id = {w["wid"]: w for w in windows}
    natural: dict[str, list[list]] = {}
    for row in (HERE / "natural.tsv").read_text(encoding="utf-8").splitlines():
        if row.startswith("#") or not row.strip():
            continue
        wid, start, value, label = row.split("\t")
        s = int(start)
        assert by_id[wid]["text"][s:s + len(value)] == value, (wid, start, value)
        natural.setdefault(wid, []).append([s, s + len(value), label])
    return windows, natural


def window_text(w: dict, natural: dict) -> Text:
    t = Text()
    pos = 0
    for s, e, label in sorted(natural.get(w["wid"], [])):
        t.add(w["text"][pos:s]).add(w["text"][s:e], label)
        pos = e
    return t.add(w["text"][pos:])


def insert_lines(rng, base: Text, extra: list[Text]) -> Text:
    """`base` with each of `extra` inserted as its own line at a line break of base
    (never inside a labeled value)."""
    text = base.text()
    breaks = [i + 1 for i, ch in enumerate(text) if ch == "\n"] + [len(text)]
    inside = {i for s, e, _ in base.spans for i in range(s, e + 1)}
    breaks = [b for b in breaks if b not in inside] or [len(text)]
    at = sorted((rng.choice(breaks), k) for k in range(len(extra)))
    out, pos = Text(), 0
    base_labels = sorted(base.spans)
    for b, k in at:
        out.extend(_slice(base, base_labels, pos, b))
        piece = Text()
        if b == len(text) and not text.endswith("\n"):
            piece.add("\n")
        piece.extend(extra[k])
        if b < len(text) or not text.endswith("\n"):
            piece.add("\n")
        out.extend(piece)
        pos = b
    return out.extend(_slice(base, base_labels, pos, len(text)))


def _slice(t: Text, labels: list[list], a: int, b: int) -> Text:
    text = t.text()
    out, pos = Text(), a
    for s, e, label in labels:
        if a <= s and e <= b:
            out.add(text[pos:s]).add(text[s:e], label)
            pos = e
    return out.add(text[pos:b])


def message(rng, windows: list[dict], plain: list[int], kinds_cycle, negs_cycle) -> Text:
    """A mailing-list message: headers, a reply with planted values, a quoted window,
    a pasted snippet and a signature."""
    sender = name(rng)
    t = Text()
    t.add("From: ").add(sender).add(" <").add(email(rng), "EMAIL").add(">\n")
    t.add("To: ").add(f"{rng.choice(WORDS)}-{rng.choice(['dev', 'users', 'announce'])}@lists.opencollab.org", "EMAIL").add("\n")
    t.add(f"Date: {rng.choice(['Mon', 'Tue', 'Wed', 'Thu', 'Fri'])}, {rng.randint(1, 28)} Mar 2024 "
          f"{rng.randint(7, 22):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} +0100\n")
    if rng.random() < 0.5:
        hop = public_ipv4(rng) if rng.random() < 0.6 else (rng.choice(DOC_V4) + str(rng.randint(1, 254)))
        label = "IP_ADDRESS" if not hop.startswith(("192.0.2.", "198.51.100.", "203.0.113.")) else "neg:doc_range_ip"
        t.add(f"Received: from smtp{rng.randint(1, 9)}.{rng.choice(MAIL_DOMAINS)} (smtp [").add(hop, label).add("])\n")
    t.add(f"Subject: Re: [{rng.choice(WORDS)}] {rng.choice(['build fails', 'deploy notes', 'migration plan', 'invoice question', 'access request'])}\n\n")
    t.add(f"Hi {rng.choice(GIVEN)},\n\n")
    body = Text()
    for _ in range(rng.randint(2, 3)):
        body.extend(pos_line(next(kinds_cycle), rng)).add("\n")
    if rng.random() < 0.8:
        body.extend(neg_line(next(negs_cycle), rng)).add("\n")
    t.extend(body).add("\n")
    w = windows[rng.choice(plain)]
    t.add(f"On {rng.randint(1, 28)} Mar 2024, {name(rng)} wrote:\n")
    t.add("\n".join("> " + x if x else ">" for x in w["text"].split("\n"))).add("\n\n")
    t.add(rng.choice(["Thanks,", "Cheers,", "Best regards,", "--"])).add("\n").add(sender).add("\n")
    sig = pos_line("PHONE", rng) if rng.random() < 0.7 else line(rng.choice(CITIES), " office")
    t.extend(sig).add("\n")
    return t


def cycle(rng, items):
    while True:
        order = list(items)
        rng.shuffle(order)
        yield from order


def build() -> list[dict]:
    rng = random.Random(17_1700)
    windows, natural = load_windows()
    kinds = cycle(rng, KINDS)
    negs = cycle(rng, NEG_TYPES)
    rows = []

    def emit(group: str, source: str, t: Text) -> None:
        text = t.text()
        spans = sorted(lab for lab in t.spans if not lab[2].startswith("neg:"))
        negatives = sorted(lab for lab in t.spans if lab[2].startswith("neg:"))
        for s, e, _ in spans + negatives:
            assert 0 <= s < e <= len(text) and text[s:e] == text[s:e].strip(), (group, text[s:e])
        rows.append({"id": f"{group}-{len(rows):04d}", "group": group, "source": source, "text": text,
                     "spans": spans, "negatives": negatives})

    for w in windows:
        planted = [pos_line(next(kinds), rng), neg_line(next(negs), rng)]
        emit("window", w["source"], insert_lines(rng, window_text(w, natural), planted))
    plain = [i for i, w in enumerate(windows) if w["wid"] not in natural]
    for _ in range(MESSAGES):
        emit("message", "composed", message(rng, windows, plain, kinds, negs))
    return rows


def main() -> None:
    rows = build()
    with open(HERE / "independent.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    spans = [s for r in rows for s in r["spans"]]
    negs = [s for r in rows for s in r["negatives"]]
    by_kind = {k: sum(1 for s in spans if s[2] == k) for k in KINDS}
    by_neg = {}
    for s in negs:
        by_neg[s[2]] = by_neg.get(s[2], 0) + 1
    print(f"wrote {len(rows)} rows: {len(spans)} spans {by_kind}, {len(negs)} hard negatives {by_neg}")


if __name__ == "__main__":
    main()
