"""The tokenizer probe a policy server must read: an export's record, or, for a base model (eval-base, the baseline
workflow: no record), burnqed's own reading of its tokenizer files, computed with `tokenizers` alone as the core
image's search and eval steps do; the SGLang client refuses a server that reads it otherwise, both id lists shown."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from burnqed.commands.edges import open_policy
from burnqed.config import PolicyConfig
from burnqed.errors import ConfigError, InputError
from burnqed.policy.modelfolder import PROBE_TEXT, folder_probe, load_tokenizer, tokenizer_probe, write_folder
from burnqed.sft.manifests import EXPORT_RECORD, expected_probe
from burnqed.storage import Store
from tests.cluster.test_fetch import deepseek_shaped_base
from tests.doubles.fault_server import FaultServer, fake_ids


def test_a_base_model_without_a_record_is_expected_to_read_as_burnqed_reads_it(tmp_path: Path,
                                                                              store: Store) -> None:
    base = deepseek_shaped_base(tmp_path / "base")
    probe = expected_probe(str(base), store=store)
    assert probe == tokenizer_probe(load_tokenizer(base)) == folder_probe(base)  # transformers and tokenizers agree
    assert probe is not None and probe[0] == 1  # the BOS that add_bos_token declares
    written = tmp_path / "written"
    write_folder(base, written)
    assert expected_probe(f"file://{written}", store=store) == probe  # the folder the sidecar serves reads the same
    (written / EXPORT_RECORD).write_text(json.dumps({"tokenizer_probe": [7, 8]}))  # a record comes first: a
    with pytest.raises(InputError):  # malformed one is refused, never passed over for the tokenizer files
        expected_probe(str(written), store=store)


def test_a_folder_without_a_tokenizer_has_no_probe_and_a_broken_one_is_refused(tmp_path: Path, store: Store) -> None:
    base = deepseek_shaped_base(tmp_path / "base")
    shutil.move(base / "tokenizer.json", tmp_path / "tokenizer.json")
    assert expected_probe(str(base), store=store) is None
    tokenizer = json.loads((tmp_path / "tokenizer.json").read_text())
    del tokenizer["model"]["vocab"]["<s>"]  # declares a BOS its vocabulary lacks
    (base / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(InputError, match=rf"policy.model {base}: .* declares special tokens \['<s>'\]"):
        expected_probe(str(base), store=store)


def test_the_policy_client_compares_a_served_base_model_with_burnqeds_reading(tmp_path: Path, store: Store) -> None:
    base = deepseek_shaped_base(tmp_path / "base")
    expected = folder_probe(base)

    async def start(model: str | None) -> None:
        cfg = PolicyConfig(backend="sglang", url=server.url, model=model, ready_timeout_s=5)
        async with open_policy(cfg, store=store):
            pass

    with FaultServer(context_length=4096) as server:  # its tokenizer: BOS, then one id per character
        asyncio.run(start(None))  # no model named: nothing to compare
        assert server.received("/tokenize") == []
        with pytest.raises(ConfigError) as refusal:
            asyncio.run(start(str(base)))
    assert (f"as the model was trained: {expected}; as the server reads it: {fake_ids(PROBE_TEXT)}"
            in str(refusal.value))
