"""Config: TOML into frozen dataclasses; unknown keys and bad values name the key."""
import dataclasses

import pytest

from shardforge.config import ConfigError, load_config

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def test_demo_config_loads_and_is_frozen():
    cfg = load_config(ROOT / "conf" / "demo.toml")
    assert cfg.shards.num_shards == 4
    assert cfg.pipeline.input == ("data/sample/docs.jsonl",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.shards.num_shards = 3


def test_overrides_parse_toml_literals():
    cfg = load_config(ROOT / "conf" / "demo.toml",
                      ["shards.num_shards=8", "dedup.threshold=0.7", "pipeline.name=x y",
                       'pipeline.stages=["ingest", "build-shards"]'])
    assert cfg.shards.num_shards == 8 and cfg.dedup.threshold == 0.7
    assert cfg.pipeline.name == "x y"
    assert cfg.pipeline.stages == ("ingest", "build-shards")


@pytest.mark.parametrize("override, message", [
    ("shards.num_shard=8", "shards.num_shard: unknown key"),
    ("shard.num_shards=8", "shard: unknown section"),
    ("shards.num_shards=eight", "shards.num_shards: expected an integer"),
    ("shards.num_shards=-1", "shards.num_shards: must be >= 0"),
    ("dedup.threshold=1.5", "dedup.threshold: must be in (0, 1]"),
    ("redact.mode=scramble", "redact.mode: 'scramble' is not one of"),
    ('pipeline.stages=["ingest", "bake"]', "pipeline.stages: unknown stage 'bake'"),
    ("nonsense", "expected section.key=value"),
])
def test_bad_values_name_the_key(override, message):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert message in str(err.value)


def test_unknown_key_in_file(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[shards]\nnum_shards = 2\nrow_groups = 3\n")
    with pytest.raises(ConfigError, match=r"shards.row_groups: unknown key \(known: "):
        load_config(p)


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[shards\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(bad)
