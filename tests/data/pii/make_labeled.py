"""Builds the labeled PII set (deterministic: same script, same bytes).

    python tests/data/pii/make_labeled.py      # writes labeled.jsonl beside this file

Each line: {"id", "group", "text", "spans": [[start, end, kind], ...]}. Groups:
`pos:<KIND>` (prose, code, logs, configs with planted values of that kind, in
varied formats), `mix` (several kinds in one snippet) and `neg:<what>` (hard
negatives: version strings, UUIDs, git SHAs, hex colours, dates, Luhn-invalid
numbers, base64 blobs, example placeholders, private addresses, ...). The gold
spans follow the policies in lib/redact/pii/README.md.
"""
from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIRST = ["james", "maria", "wei", "olga", "samir", "lena", "tomas", "aiko", "fatima", "raj", "chloe", "diego",
         "ngozi", "pieter", "ines", "kwame", "yuki", "sven", "amara", "luca"]
LAST = ["okafor", "lindqvist", "moreau", "tanaka", "haddad", "novak", "fernandes", "kowalski", "brennan",
        "zhang", "petrov", "achebe", "gallo", "jensen", "romero", "schmidt", "mbeki", "ito", "walsh", "costa"]
DOMAINS = ["gmail.com", "outlook.com", "fabrikam.io", "contoso.net", "univ-lyon2.fr", "mail.tsinghua.edu.cn",
           "proton.me", "acme-widgets.co.uk", "example.org", "research.example.net", "yahoo.co.jp",
           "post.harvard.edu", "startup.dev", "xn--mller-kva.de", "sub.mail.company.com.au"]
B62 = string.ascii_letters + string.digits
B64 = B62 + "+/"
URLSAFE = B62 + "-_"


class Doc:
    """Text built piece by piece, remembering where planted values are."""

    def __init__(self):
        self.parts: list[str] = []
        self.spans: list[list] = []
        self.n = 0

    def add(self, s: str, kind: str | None = None) -> "Doc":
        if kind:
            self.spans.append([self.n, self.n + len(s), kind])
        self.parts.append(s)
        self.n += len(s)
        return self

    def text(self) -> str:
        return "".join(self.parts)


def fill(rng: random.Random, template: str, values: dict) -> Doc:
    """`template` with {NAME} slots; values[NAME] = (text, kind or None)."""
    import re

    d = Doc()
    pos = 0
    for m in re.finditer(r"\{([A-Z])\}", template):
        d.add(template[pos:m.start()].replace("{{", "{").replace("}}", "}"))
        val, kind = values[m.group(1)]
        d.add(val, kind)
        pos = m.end()
    d.add(template[pos:].replace("{{", "{").replace("}}", "}"))
    return d


def rand(rng, alphabet, n):
    return "".join(rng.choice(alphabet) for _ in range(n))


# --- value generators: (rng) -> str ------------------------------------------------

def email(rng):
    f, l, d = rng.choice(FIRST), rng.choice(LAST), rng.choice(DOMAINS)
    local = rng.choice([f"{f}.{l}", f"{f}{l[0]}", f"{f[0]}{l}", f"{f}_{l}{rng.randint(1, 99)}",
                        f"{f}+news", f"{f}.{l}+{rng.choice(['git', 'shop', 'x1'])}", f"{l}-{f}", f"{f.upper()}.{l.capitalize()}"])
    return f"{local}@{d}"


def ipv4_public(rng):
    while True:
        a = rng.choice([8, 23, 31, 45, 52, 64, 77, 81, 89, 93, 104, 130, 142, 151, 172, 185, 193, 203, 212, 217])
        ip = f"{a}.{rng.randint(0, 255)}.{rng.randint(1, 254)}.{rng.randint(1, 254)}"
        import ipaddress
        if ipaddress.ip_address(ip).is_global:
            return ip


def ipv6_public(rng):
    groups = [rng.choice(["2001", "2a00", "2604", "2a03", "2400", "2600"])] + [f"{rng.randint(0, 65535):x}" for _ in range(7)]
    form = rng.randint(0, 2)
    if form == 0:
        return ":".join(groups)
    if form == 1:
        return ":".join(groups[:3]) + "::" + ":".join(groups[6:])
    return ":".join(groups[:4]) + "::" + groups[7]


def ip_any(rng):
    return ipv6_public(rng) if rng.random() < 0.35 else ipv4_public(rng)


def nanp(rng):
    a, b, c = rng.choice('23456789'), rng.randint(0, 9), rng.choice('023456789')
    if b == 9 or (a, b) in (("3", 7), ("9", 6)):
        b = 8                                    # N9X, 37X, 96X area codes are reserved: never phones
    npa = f"{a}{b}{c}"
    nxx = f"{rng.choice('23456789')}{rng.choice('02345678')}{rng.randint(0, 9)}"
    line = f"{rng.randint(0, 9999):04d}"
    return rng.choice([f"({npa}) {nxx}-{line}", f"{npa}-{nxx}-{line}", f"{npa}.{nxx}.{line}", f"{npa} {nxx} {line}",
                       f"+1 {npa} {nxx} {line}", f"+1-{npa}-{nxx}-{line}", f"1-{npa}-{nxx}-{line}",
                       f"+1 ({npa}) {nxx}-{line}", f"+1{npa}{nxx}{line}"])


INTL = [("44", ["20 7946 {4}", "7700 900{3}", "161 496 {4}"]), ("49", ["30 {4}{3}", "151 {4} {4}", "89 {3} {4}"]),
        ("33", ["1 {2} {2} {2} {2}", "6 {2} {2} {2} {2}"]), ("81", ["3-{4}-{4}", "90-{4}-{4}"]),
        ("91", ["98{3} {5}", "22 {4} {4}"]), ("61", ["2 {4} {4}", "4{2} {3} {3}"]), ("55", ["11 9{4}-{4}"]),
        ("34", ["91 {3} {2} {2}", "6{2} {3} {3}"]), ("39", ["06 {4} {4}", "3{2} {3} {4}"]),
        ("86", ["10 {4} {4}", "138 {4} {4}"]), ("27", ["21 {3} {4}"]), ("353", ["1 {3} {4}"]), ("971", ["4 {3} {4}"])]


def intl(rng):
    cc, pats = rng.choice(INTL)
    pat = rng.choice(pats)
    out = pat
    for k in (5, 4, 3, 2):
        while "{%d}" % k in out:
            out = out.replace("{%d}" % k, "".join(rng.choice(string.digits) for _ in range(k)), 1)
    prefix = rng.choice(["+", "+", "+", "00"])
    sep = "" if prefix == "+" else " "
    return f"{prefix}{sep}{cc} {out}" if rng.random() < 0.85 else f"+{cc}{out.replace(' ', '').replace('-', '')}"


def phone(rng):
    return nanp(rng) if rng.random() < 0.55 else intl(rng)


def luhn_complete(prefix: str, length: int, rng) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for d in string.digits:
        cand = body + d
        total = 0
        for i, ch in enumerate(reversed(cand)):
            x = int(ch) * (2 if i % 2 else 1)
            total += x - 9 if x > 9 else x
        if total % 10 == 0:
            return cand
    raise AssertionError


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        x = int(ch) * (2 if i % 2 else 1)
        total += x - 9 if x > 9 else x
    return total % 10 == 0


def card_digits(rng):
    brand = rng.choice(["visa", "visa", "mc", "mc2", "amex", "disc", "jcb", "diners"])
    prefix, length = {"visa": ("4", 16), "mc": (str(rng.randint(51, 55)), 16), "mc2": (str(rng.randint(2221, 2720)), 16),
                      "amex": (rng.choice(["34", "37"]), 15), "disc": ("6011", 16), "jcb": (str(rng.randint(3528, 3589)), 16),
                      "diners": (str(rng.randint(300, 305)), 14)}[brand]
    return luhn_complete(prefix, length, rng)


def group_card(digits, sep, rng):
    if len(digits) == 15:
        parts = [digits[:4], digits[4:10], digits[10:]]
    elif len(digits) == 14:
        parts = [digits[:4], digits[4:10], digits[10:]]
    else:
        parts = [digits[i:i + 4] for i in range(0, len(digits), 4)]
    return sep.join(parts)


def card(rng):
    return group_card(card_digits(rng), rng.choice([" ", "-", ""]), rng)


def ssn_digits(rng):
    while True:
        a = rng.randint(1, 899)
        if a == 666:
            continue
        d = f"{a:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}"
        if d not in ("078051120", "219099999", "123456789"):
            return d


def ssn(rng):
    d = ssn_digits(rng)
    return rng.choice([f"{d[:3]}-{d[3:5]}-{d[5:]}", f"{d[:3]}-{d[3:5]}-{d[5:]}", f"{d[:3]} {d[3:5]} {d[5:]}"])


IBAN_FMT = {"DE": "8n10n", "GB": "4a14n", "FR": "5n5n11c2n", "NL": "4a10n", "ES": "20n", "IT": "1a10n12c",
            "BE": "12n", "CH": "5n12c", "AT": "16n", "PL": "24n", "SE": "20n", "IE": "4a14n", "PT": "21n", "NO": "11n"}


def iban_raw(rng):
    cc = rng.choice(sorted(IBAN_FMT))
    bban = ""
    fmt = IBAN_FMT[cc]
    num = ""
    for ch in fmt:
        if ch.isdigit():
            num += ch
            continue
        alpha = {"n": string.digits, "a": string.ascii_uppercase, "c": string.ascii_uppercase + string.digits}[ch]
        bban += "".join(rng.choice(alpha) for _ in range(int(num)))
        num = ""
    rearranged = bban + cc + "00"
    check = 98 - int("".join(str(int(c, 36)) for c in rearranged)) % 97
    return f"{cc}{check:02d}{bban}"


def iban(rng):
    raw = iban_raw(rng)
    if rng.random() < 0.5:
        return " ".join(raw[i:i + 4] for i in range(0, len(raw), 4))
    return raw


def jwt(rng):
    def enc(obj):
        return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).rstrip(b"=").decode()
    head = enc({"alg": rng.choice(["HS256", "RS256", "ES256"]), "typ": "JWT"})
    body = enc({"sub": str(rng.randint(10 ** 6, 10 ** 9)), "name": rng.choice(FIRST), "iat": rng.randint(1.5e9, 1.8e9)})
    sig = rand(rng, URLSAFE, rng.choice([43, 86]))
    return f"{head}.{body}.{sig}"


def pem(rng):
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
    lines = [rand(rng, B64, 64) for _ in range(rng.randint(3, 8))] + [rand(rng, B64, rng.randint(10, 60)) + "=="]
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


def secret_value(rng):
    kind = rng.randint(0, 3)
    if kind == 0:
        return rand(rng, B62, rng.randint(20, 40))
    if kind == 1:
        return "".join(rng.choice(string.hexdigits.lower()[:16]) for _ in range(32))
    if kind == 2:
        return rand(rng, string.ascii_letters + string.digits + "!@#%^&*-_", rng.randint(12, 24))
    words = ["Tr0ub4dor", "S3cure", "Winter", "P@ssw0rd", "Blue", "Sky", "Zebra", "Kite"]
    return rng.choice(words) + rng.choice("!#%&*") + str(rng.randint(10, 9999)) + rng.choice(words)


def key_token(rng):
    """(value, context template) for provider tokens."""
    k = rng.randint(0, 10)
    if k == 0:
        return "AKIA" + rand(rng, string.ascii_uppercase + string.digits, 16)
    if k == 1:
        return rng.choice(["ghp_", "gho_", "ghs_"]) + rand(rng, B62, 36)
    if k == 2:
        return "github_pat_" + rand(rng, B62, 22) + "_" + rand(rng, B62, 59)
    if k == 3:
        return "glpat-" + rand(rng, B62 + "-_", 20)
    if k == 4:
        return f"xoxb-{rng.randint(10 ** 10, 10 ** 12)}-{rng.randint(10 ** 11, 10 ** 13)}-{rand(rng, B62, 24)}"
    if k == 5:
        return "AIza" + rand(rng, B62 + "-_", 35)
    if k == 6:
        return rng.choice(["sk_live_", "sk_test_", "rk_live_"]) + rand(rng, B62, rng.choice([24, 32, 99]))
    if k == 7:
        return jwt(rng)
    if k == 8:
        return f"https://hooks.slack.com/services/T{rand(rng, string.ascii_uppercase + string.digits, 8)}/B{rand(rng, string.ascii_uppercase + string.digits, 10)}/{rand(rng, B62, 24)}"
    if k == 9:
        return "ASIA" + rand(rng, string.ascii_uppercase + string.digits, 16)
    return "ghu_" + rand(rng, B62, 36)


# --- positive templates: {V} is the planted value ---------------------------------
POS = {
    "EMAIL": ["Please contact {V} for details about the grant.", "From: {N} <{V}>\nSubject: re: draft",
              "mailto:{V}", 'user = {{"name": "{N}", "email": "{V}"}}', "Send the invoice to {V}.",
              "Maintainer: {N} ({V})", "cc: {V}, thanks!", "{N},{V},2023-04-01,active",
              "# Author: {V}\nimport os", "Reach out ({V}) if the build breaks", "EMAIL={V}",
              "Contact us at: {V}\nOffice hours 9-5."],
    "IP_ADDRESS": ["Connection from {V} port 51234 refused", "server {V}:443 answered slowly",
                   "2024-03-01T12:00:01Z INFO client={V} status=200", "nameserver {V}", "curl http://{V}/health",
                   "The attacker's address was {V}.", "allow from {V};", '{{"remote_addr": "{V}", "ua": "curl"}}',
                   "ssh admin@[{V}]", "Ping {V} and report the latency", "X-Forwarded-For: {V}"],
    "PHONE": ["Call me at {V} after five.", "Tel: {V}", "Phone: {V}\nFax: none", "{N} - mobile {V}",
              "For support dial {V} (Mon-Fri).", '"phone": "{V}"', "tel:{V}", "Reach the front desk on {V}.",
              "{N},{V},London"],
    "CREDIT_CARD": ["Card number: {V}", "charged to {V} exp 04/27", '{{"pan": "{V}", "cvv": "***"}}',
                    "Please use card {V} for the deposit.", "cc={V}&amount=12.50", "{N},{V},VISA"],
    "US_SSN": ["SSN: {V}", "Her social security number is {V}.", "ssn={V}", "{N}, DOB 1984-02-11, SSN {V}",
               "Employee SSN {V} on file", '"ssn": "{V}"'],
    "IBAN": ["IBAN: {V}", "Please wire the refund to {V} (BIC DEUTDEFF).", "Kontonummer / IBAN {V}",
             "iban={V}", "Beneficiary: {N}, {V}", '{{"iban": "{V}"}}'],
}
KEY_CONTEXTS = ["export GITHUB_TOKEN={V}", "token: {V}", "Authorization: Bearer {V}", "curl -H 'X-Api-Key: {V}' ...",
                "const client = new Client('{V}');", "STRIPE_SECRET_KEY={V}", "# leaked in CI log: {V}",
                "key = \"{V}\"", "webhook {V}", "use {V} to authenticate"]
ASSIGN_CONTEXTS = ['password = "{V}"', "DB_PASSWORD={V}", "SECRET_KEY = '{V}'", '"api_key": "{V}",', "client_secret: {V}",
                   "auth_token={V}", "aws_secret_access_key = {V}", "private_key: '{V}'", "app.config['SECRET'] = '{V}'",
                   "--password {V}", "api-key: {V}", "ACCESS_KEY={V}"]


def neg(rng) -> dict[str, list]:
    """Hard negatives by group: each a list of texts with no PII under the policy."""
    hexd = "0123456789abcdef"
    sha = rand(rng, hexd, 40)
    uuid = f"{rand(rng, hexd, 8)}-{rand(rng, hexd, 4)}-4{rand(rng, hexd, 3)}-a{rand(rng, hexd, 3)}-{rand(rng, hexd, 12)}"
    bad_luhn = card_digits(rng)
    bad_luhn = bad_luhn[:-1] + str((int(bad_luhn[-1]) + rng.randint(1, 9)) % 10)
    blob = base64.b64encode(bytes(rng.randrange(256) for _ in range(rng.randint(40, 120)))).decode()
    return {
        "version": [f"Upgrade to version {rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}.{rng.randint(0, 99)} today.",
                    f"v{rng.randint(1, 5)}.{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(1, 200)} released",
                    f"Mozilla/5.0 Chrome/{rng.randint(90, 130)}.0.{rng.randint(1000, 7000)}.{rng.randint(10, 200)} Safari/537.36",
                    f"numpy=={rng.randint(1, 2)}.{rng.randint(0, 26)}.{rng.randint(0, 5)}",
                    f"OID 1.3.6.1.4.1.{rng.randint(100, 9999)}.1.2", f"build {rng.randint(1, 9)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}.{rng.randint(100, 255)}",
                    f"firmware {rng.randint(1, 9)}.{rng.randint(0, 99)}.{rng.randint(0, 99)}.{rng.randint(0, 99)} is out",
                    f"section {rng.randint(1, 9)}.{rng.randint(1, 9)}.{rng.randint(1, 9)}.{rng.randint(1, 9)} of the spec"],
        "uuid": [f"request_id={uuid}", f"The object {uuid} was deleted.", f'{{"id": "{uuid}"}}'],
        "git_sha": [f"commit {sha}\nAuthor: build bot", f"Fixed in {sha[:7]} and {sha[:12]}.", f"pinned to rev {sha}",
                    f"sha256: {rand(rng, hexd, 64)}"],
        "hex_colour": [f"color: #{rand(rng, hexd, 6)}; background: #{rand(rng, hexd, 3)};", f"palette = ['#{rand(rng, hexd, 6)}', '#{rand(rng, hexd, 6)}']"],
        "date_time": [f"{rng.randint(1990, 2030)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z started",
                      f"Due {rng.randint(1, 12):02d}/{rng.randint(1, 28):02d}/{rng.randint(1990, 2030)} at {rng.randint(1, 12)}:{rng.randint(0, 59):02d} pm",
                      f"{rng.randint(1, 28)}.{rng.randint(1, 12)}.{rng.randint(1990, 2030)} - {rng.randint(1, 28)}.{rng.randint(1, 12)}.{rng.randint(1990, 2030)}",
                      f"between {rng.randint(1990, 2010)} - {rng.randint(2011, 2030)} and {rng.randint(1900, 1990)}-{rng.randint(1991, 2000)}"],
        "luhn_invalid": [f"Card number: {group_card(bad_luhn, rng.choice([' ', '-', '']), rng)}",
                         f"order {bad_luhn} shipped", f"tracking {bad_luhn[::-1] if not _luhn(bad_luhn[::-1]) else bad_luhn}"],
        "base64": [f"data:image/png;base64,{blob}", f"payload: {blob}", f"-----BEGIN CERTIFICATE-----\n{blob[:64]}\n{blob[64:]}\n-----END CERTIFICATE-----",
                   f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{rand(rng, B64, 43)} {rng.choice(FIRST)}@laptop"],
        "placeholder": ["Write to user@example.com to test the form.", "email: your.email@domain.com",
                        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                        "Use the test card 4242 4242 4242 4242 in sandbox mode.", "card: 4111-1111-1111-1111",
                        "SSN format: XXX-XX-XXXX, e.g. 123-45-6789", "The Woolworth card 078-05-1120 is not valid.",
                        "Call 555-0123 or (212) 555-0199 in the film.", 'password = "changeme"', "API_KEY=your_api_key_here",
                        "token: <YOUR_TOKEN>", "password: ${DB_PASSWORD}", "postgres://user:password@localhost:5432/db",
                        "api_key = os.environ['API_KEY']", "Authorization: Bearer <token>", "secret: xxxxxxxxxxxxxxxx",
                        "IBAN example: GB82 WEST 1234 5698 7654 32", "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                        "email you@example.org with questions", "sk_test_EXAMPLE0000000000000000", "name@domain.com"],
        "private_ip": [f"listen 127.0.0.1:{rng.randint(1024, 65535)}", f"gateway 192.168.{rng.randint(0, 255)}.1",
                       f"DB_HOST=10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}", "bind 0.0.0.0", "ping ::1",
                       f"fe80::{rand(rng, hexd, 4)}:{rand(rng, hexd, 4)}:{rand(rng, hexd, 4)}:{rand(rng, hexd, 4)}%eth0",
                       f"multicast group 239.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                       "netmask 255.255.255.0", f"k8s pod 172.{rng.randint(16, 31)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"],
        "code_tokens": ["tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')", "max_tokens = 4096",
                        "password_hash = bcrypt.hashpw(pw, salt)", "secret_santa_rounds: 3", "if token is None: raise",
                        "num_tokens: 2048", "def get_api_key(self): return self._api_key", "token = tokens[0]",
                        "password_min_length = 12", "@app.route('/login')", "@Override\npublic void run()",
                        "npm install left-pad@1.3.0 lodash@4.17.21", "<img src='logo@2x.png'>",
                        "git clone git@github.com:psf/requests.git", "@babel/core@7.22.0", "std::vector<int> v; a::b::c",
                        "ratio 3.14159 and 2.71828", f"MAC {':'.join(rand(rng, hexd, 2) for _ in range(6))}",
                        "at 12:30:45.123 the job ended", "$1,234,567.89 in Q3", "ISBN 978-0-306-40615-7",
                        "coords 37.7749, -122.4194", "x = a[1:2:3]", "time 10:45:00 - 11:30:00"],
        "numbers": [f"Order #{rng.randint(100, 999)}-{rng.randint(100, 999)}-{rng.randint(1000, 9999)} shipped",
                    f"population {rng.randint(1, 9)},{rng.randint(100, 999)},{rng.randint(100, 999)}",
                    f"ids 1000{rng.randint(100000, 999999)} and {rng.randint(10 ** 8, 10 ** 9)}",
                    f"zip {rng.randint(10000, 99999)}-{rng.randint(1000, 9999)}", f"case no. {rng.randint(100, 899)}-{rng.randint(10, 99)}-{rng.randint(1000, 9999)}",
                    f"serial {rng.randint(10 ** 11, 10 ** 12)}", f"+{rng.randint(1, 9)}.{rng.randint(1, 99)}% growth"],
    }


def main() -> None:
    rng = random.Random(5_2026)
    rows = []

    def emit(group, doc):
        rows.append({"id": f"{group}-{len(rows):04d}", "group": group, "text": doc.text(), "spans": doc.spans})

    gens = {"EMAIL": email, "IP_ADDRESS": ip_any, "PHONE": phone, "CREDIT_CARD": card, "US_SSN": ssn, "IBAN": iban}
    for kind, gen in gens.items():
        for i in range(70):
            tpl = POS[kind][i % len(POS[kind])]
            name = f"{rng.choice(FIRST).capitalize()} {rng.choice(LAST).capitalize()}"
            value = gen(rng)
            if kind == "IP_ADDRESS" and ":" in value and "{V}:" in tpl:
                tpl = tpl.replace("{V}:", "[{V}]:")          # IPv6 with a port needs brackets
            emit(f"pos:{kind}", fill(rng, tpl, {"V": (value, kind), "N": (name, None)}))
    for i in range(45):
        emit("pos:KEY", fill(rng, KEY_CONTEXTS[i % len(KEY_CONTEXTS)], {"V": (key_token(rng), "KEY")}))
    for i in range(30):
        emit("pos:KEY", fill(rng, ASSIGN_CONTEXTS[i % len(ASSIGN_CONTEXTS)], {"V": (secret_value(rng), "KEY")}))
    for i in range(10):
        d = Doc().add("# deploy key, do not commit\n").add(pem(rng), "KEY").add("\n")
        emit("pos:KEY", d)
    for i in range(15):
        user = rng.choice(["admin", "app", "svc_etl", "root", rng.choice(FIRST)])
        scheme = rng.choice(["postgres", "mysql", "mongodb+srv", "redis", "amqp", "https"])
        host = rng.choice(["db.internal.fabrikam.io", "cluster0.ab1cd.mongodb.net", "10.0.3.7", "cache.contoso.net"])
        d = Doc().add(f"DATABASE_URL={scheme}://{user}:").add(secret_value(rng).replace("@", "x").replace("/", "y").replace(":", "z"), "KEY").add(f"@{host}/prod")
        emit("pos:KEY", d)
    # mixed snippets: several kinds at once, plus a hard negative
    for i in range(80):
        d = Doc()
        name = f"{rng.choice(FIRST).capitalize()} {rng.choice(LAST).capitalize()}"
        d.add(f"Ticket #{rng.randint(1000, 9999)} from {name} (").add(email(rng), "EMAIL").add(", ").add(phone(rng), "PHONE")
        d.add(f") on {rng.randint(2019, 2025)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}: login from ").add(ip_any(rng), "IP_ADDRESS")
        d.add(f" failed after upgrading to v{rng.randint(1, 4)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}.")
        r = i % 5
        if r == 0:
            d.add(" Refund to ").add(iban(rng), "IBAN").add(".")
        elif r == 1:
            d.add(" Card ").add(card(rng), "CREDIT_CARD").add(" was declined.")
        elif r == 2:
            d.add("\nconfig: api_key=").add(key_token(rng) if rng.random() < 0.5 else secret_value(rng), "KEY")
        elif r == 3:
            d.add(" Verified SSN ").add(ssn(rng), "US_SSN").add(".")
        else:
            d.add(f" Commit {rand(rng, '0123456789abcdef', 40)} fixed it.")
        emit("mix", d)
    for _ in range(14):
        for group, texts in neg(rng).items():
            emit(f"neg:{group}", Doc().add(rng.choice(texts)))
    for group, texts in neg(random.Random(1)).items():      # every fixed negative at least once
        for t in texts:
            emit(f"neg:{group}", Doc().add(t))
    out = HERE / "labeled.jsonl"
    out.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} snippets to {out}")


if __name__ == "__main__":
    main()
