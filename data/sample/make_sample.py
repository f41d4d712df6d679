"""Regenerates the bundled sample corpus (deterministic: same script, same bytes).

    python data/sample/make_sample.py

docs.jsonl: 300 documents of plain prose with planted problems the pipeline must
handle: exact duplicates (some differing only in case and spacing), near
duplicates, e-mail addresses and public IP addresses to redact, private addresses
that stay, a few too-short documents, one malformed line, one record without text.
web/: pages and images the demo serves on 127.0.0.1; web/urls.txt lists the paths
to fetch (one a deliberate 404).
"""
from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SLOTS = {
    "rivers": (["the river", "a cold stream", "the current", "spring water", "the old channel", "silt", "the flood"],
               ["carves", "fills", "crosses", "feeds", "drains", "floods", "shapes"],
               ["the shallow banks", "gravel bars", "the mill pond", "low meadows", "the delta", "reed beds"],
               ["below the bridge", "near the weir", "past the village", "under the cliffs", "by the ferry"],
               ["each spring", "after heavy rain", "in late summer", "at dawn", "every decade"]),
    "bread": (["the dough", "a rye starter", "the baker", "warm flour", "the crust", "a sourdough loaf"],
              ["rises", "darkens", "absorbs", "rests", "softens", "cracks", "shapes"],
              ["extra water", "a tight skin", "open crumb", "the steam", "a deep flavour", "the salt"],
              ["in the proofing basket", "on the stone", "beside the oven", "in a cool larder", "under linen"],
              ["overnight", "within an hour", "before dawn", "after folding", "while cooling"]),
    "networks": (["the router", "a busy link", "the load balancer", "an edge cache", "the resolver", "a backbone"],
                 ["forwards", "drops", "retries", "caches", "balances", "routes", "measures"],
                 ["small packets", "stale answers", "new sessions", "latency spikes", "route updates", "the traffic"],
                 ["at the border", "inside the region", "across the ocean", "behind the firewall", "near the origin"],
                 ["during peak hours", "after the outage", "every few seconds", "under heavy load", "at midnight"]),
    "gardens": (["the gardener", "a tomato vine", "young lettuce", "the compost", "a honey bee", "the hedge"],
                ["needs", "covers", "shades", "feeds", "attracts", "protects", "outgrows"],
                ["the raised bed", "fresh mulch", "the lavender", "tender shoots", "dry soil", "the seedlings"],
                ["against the south wall", "by the greenhouse", "along the path", "under the apple tree", "near the pond"],
                ["in early May", "through the dry months", "after the frost", "by midsummer", "every morning"]),
    "astronomy": (["the observer", "a small refractor", "the planet", "a faint comet", "the moon", "a variable star"],
                  ["reveals", "tracks", "dims", "brightens", "crosses", "records", "outshines"],
                  ["four small moons", "the eastern sky", "distant clusters", "the star chart", "thin rings", "dark lanes"],
                  ["above the hills", "over the city", "near the horizon", "from the rooftop", "in the south"],
                  ["after sunset", "on winter nights", "before dawn", "during the eclipse", "for an hour"]),
    "trains": (["the night train", "a freight convoy", "the conductor", "a branch line", "the signal box", "commuters"],
               ["climbs", "reaches", "delays", "crosses", "serves", "waits for", "passes"],
               ["the mountain pass", "the junction", "the coastal towns", "a long viaduct", "the last platform", "the depot"],
               ["beyond the tunnel", "along the valley", "near the harbour", "past the border", "through the forest"],
               ["by early morning", "after ten", "on weekdays", "in heavy snow", "twice a day"]),
}
TOPICS = SLOTS
NAMES = ["alice", "bob", "carla", "dmitri", "erin", "farah", "goran", "hana", "ivan", "julia"]
DOMAINS = ["example.com", "mail.example.org", "research.example.net", "example.co.uk"]
PUBLIC_IPS = ["203.0.113.7", "198.51.100.23", "8.8.8.8", "151.101.1.69", "93.184.216.34"]
PRIVATE_IPS = ["10.0.0.12", "192.168.1.20", "127.0.0.1"]


def sentence(rng: random.Random, topic: str) -> str:
    words = " ".join(rng.choice(slot) for slot in SLOTS[topic])
    return words[0].upper() + words[1:] + "."


def paragraph(rng: random.Random, topic: str, n: int) -> str:
    return " ".join(sentence(rng, topic) for _ in range(n))


def main() -> None:
    rng = random.Random(20261130)
    docs: list[dict] = []
    topics = sorted(TOPICS)
    for i in range(240):
        topic = topics[i % len(topics)]
        text = "\n\n".join(paragraph(rng, topic, rng.randint(3, 6)) for _ in range(rng.randint(2, 4)))
        doc = {"text": text, "lang": "en", "topic": topic}
        if i % 8 == 1:
            who = rng.choice(NAMES)
            doc["text"] += f"\n\nQuestions to {who}.{rng.choice(NAMES)}@{rng.choice(DOMAINS)} before Friday."
        if i % 12 == 5:
            doc["text"] += f"\n\nThe mirror at {rng.choice(PUBLIC_IPS)} answered within 40 ms."
        if i % 30 == 7:
            doc["text"] += f"\n\nThe lab printer sits at {rng.choice(PRIVATE_IPS)} on the office network."
        if i % 3 == 0:
            doc["id"] = f"doc-{i:04d}"
        docs.append(doc)
    # exact duplicates: verbatim, and with changed case and spacing (same normalised text)
    for j, i in enumerate(range(3, 240, 12)):
        src = docs[i]
        text = src["text"] if j % 2 == 0 else "  " + src["text"].upper().replace(" ", "  ") + "\n"
        docs.append({"text": text, "lang": "en", "topic": src["topic"], "copy_of": i})
    # near duplicates: one sentence changed at the end of a long document
    for i in range(10, 240, 24):
        src = docs[i]
        docs.append({"text": src["text"] + " " + sentence(rng, src["topic"]), "lang": "en",
                     "topic": src["topic"], "near_copy_of": i})
    docs += [{"text": "ok", "lang": "en"}, {"text": "   ", "lang": "en"}, {"text": "Hi.", "lang": "en"}]
    docs.append({"id": "no-text-1", "lang": "en"})
    rng.shuffle(docs)
    lines = [json.dumps(d, ensure_ascii=False, sort_keys=True) for d in docs]
    lines.insert(57, '{"id": "broken-1", "text": "this line was cut off')
    (HERE / "docs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    make_web(rng)
    print(f"wrote {len(lines)} lines to docs.jsonl")


def make_web(rng: random.Random) -> None:
    from PIL import Image, ImageDraw

    paths = []
    for k, (fmt, ext, size) in enumerate([("JPEG", "jpg", (320, 240)), ("PNG", "png", (200, 300)),
                                          ("WEBP", "webp", (512, 256)), ("GIF", "gif", (120, 120)),
                                          ("JPEG", "jpg", (640, 480)), ("PNG", "png", (64, 64))]):
        img = Image.new("RGB", size, (40 * k % 255, 90, 160))
        draw = ImageDraw.Draw(img)
        for _ in range(12):
            x0, y0 = rng.randrange(size[0]), rng.randrange(size[1])
            draw.rectangle([x0, y0, x0 + size[0] // 5, y0 + size[1] // 5],
                           fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
        name = f"img/picture-{k}.{ext}"
        img.save(HERE / "web" / name, format=fmt)
        paths.append((name, f"A generated picture number {k}"))
    for k, topic in enumerate(sorted(TOPICS)[:4]):
        body = "".join(f"<p>{paragraph(rng, topic, 4)}</p>\n" for _ in range(3))
        html = (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>Notes on {topic}</title>"
                f"<style>p {{ margin: 1em }}</style></head><body><nav>Home | About | Contact</nav>\n"
                f"<article><h1>Notes on {topic}</h1>\n{body}</article>"
                f"<footer>Contact webmaster@example.com</footer></body></html>\n")
        name = f"pages/{topic}.html"
        (HERE / "web" / name).write_text(html, encoding="utf-8")
        paths.append((name, ""))
    paths.append(("pages/missing.html", ""))
    with open(HERE / "web" / "urls.txt", "w", encoding="utf-8") as fh:
        for p, caption in paths:
            fh.write(f"{p}\t{caption}\n")


if __name__ == "__main__":
    main()
