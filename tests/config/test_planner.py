"""The `[planner]` section (burnqed/config/planner.py) and the planner's client (`commands.edges.open_planner`): the
policy plans unless a second model is named, a second model's keys are refused without it, the planner's settings
enter the search and eval identities in sketch mode only, and a served planner is asked /health before work."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from burnqed.commands.edges import check_planner_room, open_planner
from burnqed.config import Config, PlannerConfig, PolicyConfig, load_config
from burnqed.config.identity import identity_keys, identity_values
from burnqed.config.planner import SECOND_MODEL_KEYS
from burnqed.errors import ConfigError, PolicyUnavailableError
from burnqed.policy.sglang import SGLangClient
from burnqed.records.enums import SearchMode
from burnqed.search.modes import MODES
from burnqed.storage import Store
from burnqed.text.prompt import PromptFormat
from tests.doubles.fault_server import FaultServer

SKETCH = ["search.mode=sketch"]


def test_by_default_the_policy_plans() -> None:
    planner = Config().planner
    assert planner.backend is None and not planner.served
    assert (planner.url, planner.model, planner.prompt_format, planner.max_new_tokens, planner.gpus) == (
        "http://127.0.0.1:30002", None, None, 1024, 1)
    with pytest.raises(ValueError, match="the policy plans"):
        planner.client_config(PolicyConfig())


SECOND_MODEL_VALUES = [("url", "http://planner:30000"), ("model", "/models/planner"),
                       ("prompt_format", "deepseek-sketch"), ("gpus", "2"), ("model_config_json", "/tmp/config.json"),
                       ("sglang_args", '["--dtype", "bfloat16"]')]


@pytest.mark.parametrize(("key", "value"), SECOND_MODEL_VALUES)
def test_a_second_models_key_without_a_backend_is_refused_in_one_line(key: str, value: str) -> None:
    assert key in SECOND_MODEL_KEYS
    with pytest.raises(ConfigError) as refused:
        load_config(sets=[f"planner.{key}={value}"])
    message = str(refused.value)
    assert f"planner.{key} is set but planner.backend is not: the policy plans and would ignore it" in message
    assert f"(from --set planner.{key})" in message and "\n" not in message
    assert load_config(sets=["planner.backend=sglang", f"planner.{key}={value}"]).planner.served


def test_the_second_models_keys_are_those_marked_so_and_every_other_key_applies_whoever_plans() -> None:
    """SECOND_MODEL_KEYS comes from the marks (role "second model"), and the refusal above covers each of them; every
    other key is marked "whoever plans" and is taken without a backend."""
    from burnqed.config.planner import ANY, SECOND, PlannerConfig

    refused = {name for name, _ in SECOND_MODEL_VALUES}
    assert set(SECOND_MODEL_KEYS) == refused
    others = {name for name, info in PlannerConfig.model_fields.items()
              if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("role") == ANY}
    assert others == {"backend", "temperature", "top_p", "max_new_tokens", "constrained", "max_holes", "balanced"}
    assert others | refused == set(PlannerConfig.model_fields) and SECOND != ANY
    taken = load_config(sets=["planner.temperature=1.2", "planner.top_p=0.5", "planner.max_new_tokens=64"]).planner
    assert (taken.backend, taken.temperature, taken.top_p, taken.max_new_tokens) == (None, 1.2, 0.5, 64)


def test_the_sampling_applies_whoever_plans_and_bad_values_are_refused() -> None:
    assert load_config(sets=["planner.temperature=1.2", "planner.max_new_tokens=2048"]).planner.temperature == 1.2
    for setting, problem in (("planner.temperature=-1", "planner.temperature: Input should be greater than or equal "
                                                        "to 0"),
                             ("planner.top_p=0", "planner.top_p: Input should be greater than 0"),
                             ("planner.max_new_tokens=0", "planner.max_new_tokens: Input should be greater than or "
                                                          "equal to 1"),
                             ("planner.backend=vllm", "planner.backend: Input should be 'local' or 'sglang'")):
        with pytest.raises(ConfigError, match=problem):
            load_config(sets=[setting])
    with pytest.raises(ConfigError, match=r"planner.url: Value error, url 'ftp://planner' is not an http\(s\) URL"):
        load_config(sets=["planner.backend=sglang", "planner.url=ftp://planner"])
    with pytest.raises(ConfigError, match="'--sampling-defaults=model' sets SGLang's --sampling-defaults: the "
                                          "planner's sidecar"):
        load_config(sets=["planner.backend=sglang", 'planner.sglang_args=["--sampling-defaults=model"]'])


def test_the_planners_format_is_its_familys_sketch_format() -> None:
    policy = PolicyConfig(prompt_format=PromptFormat.DEEPSEEK_TACTIC)
    assert PlannerConfig().sent_format(policy.prompt_format) is PromptFormat.DEEPSEEK_SKETCH
    assert PlannerConfig().sent_format(PromptFormat.PLAIN_PROOF) is PromptFormat.PLAIN_SKETCH
    second = PlannerConfig(backend="sglang", prompt_format=PromptFormat.PLAIN_SKETCH)
    assert second.sent_format(policy.prompt_format) is PromptFormat.PLAIN_SKETCH
    named_by_tactic = PlannerConfig(backend="sglang", prompt_format=PromptFormat.DEEPSEEK_TACTIC)
    assert named_by_tactic.sent_format(PromptFormat.PLAIN_TACTIC) is PromptFormat.DEEPSEEK_SKETCH


def test_the_sampling_section_takes_the_planners_temperature_and_top_p_where_set() -> None:
    policy = PolicyConfig(temperature=0.7, top_p=0.9, top_k=20, seed=5)
    assert PlannerConfig().sampling_section(policy) == policy
    sampled = PlannerConfig(temperature=1.1).sampling_section(policy)
    assert (sampled.temperature, sampled.top_p, sampled.top_k, sampled.seed) == (1.1, 0.9, 20, 5)
    sampled = PlannerConfig(temperature=0.0, top_p=0.5).sampling_section(policy)
    assert (sampled.temperature, sampled.top_p) == (0.0, 0.5)  # 0 is a value, not "unset"


def test_the_client_config_is_the_second_model_with_the_policys_client_settings() -> None:
    cfg = load_config(sets=["planner.backend=sglang", "planner.url=http://planner.burnqed:30000",
                            "planner.model=s3://b/planner", "policy.context_length=4096", "policy.retries=7",
                            "policy.wait_for_start=true", "policy.url=http://127.0.0.1:30000"])
    client = cfg.planner.client_config(cfg.policy)
    assert (client.backend, client.url, client.model, client.context_length) == (
        "sglang", "http://planner.burnqed:30000", "s3://b/planner", None)  # its context: asked from its own server
    assert (client.retries, client.wait_for_start, client.ready_timeout_s) == (7, True, cfg.policy.ready_timeout_s)


# ------------------------------------------------------------------------------------------ identity


PLANNER_SEARCHED = {"planner.backend", "planner.model", "planner.prompt_format", "planner.temperature",
                    "planner.top_p", "planner.max_new_tokens", "planner.constrained", "planner.max_holes",
                    "planner.balanced"}


@pytest.mark.parametrize("identity", ["search", "eval"])
def test_the_planners_settings_enter_the_identity_in_sketch_mode_only(identity: str) -> None:
    for mode in SearchMode:
        keys = {key for key in identity_keys(Config, identity, MODES[mode].reads())  # type: ignore[arg-type]
                if key.startswith("planner.")}
        assert keys == (PLANNER_SEARCHED if mode is SearchMode.SKETCH else set()), mode
    sketch, step = MODES[SearchMode.SKETCH].reads(), MODES[SearchMode.STEP].reads()
    base = load_config(sets=[*SKETCH, "planner.backend=sglang"])
    for key, value in (("temperature", "1.3"), ("top_p", "0.5"), ("max_new_tokens", "99"), ("model", "m"),
                       ("prompt_format", "deepseek-sketch"), ("backend", "local"), ("constrained", "true"),
                       ("max_holes", "2"), ("balanced", "true")):
        other = load_config(sets=[*SKETCH, "planner.backend=sglang", f"planner.{key}={value}"])
        assert identity_values(other, identity, sketch) != identity_values(base, identity, sketch), key  # type: ignore[arg-type]
        assert identity_values(other, identity, step) == identity_values(base, identity, step), key  # type: ignore[arg-type]
    for key, value in (("url", "http://elsewhere:1"), ("gpus", "2"), ("model_config_json", "c.json"),
                       ("sglang_args", '["--dtype", "bfloat16"]')):  # where it runs, not what it finds
        other = load_config(sets=[*SKETCH, "planner.backend=sglang", f"planner.{key}={value}"])
        assert identity_values(other, identity, sketch) == identity_values(base, identity, sketch), key  # type: ignore[arg-type]


@pytest.mark.slow  # builds an eval result
def test_an_older_sketch_result_compares_its_recorded_sampling_as_the_policys() -> None:
    """A result without `made_from` records its settings by bare name (`temperature`): in sketch mode that name is
    both policy.temperature and planner.temperature, and the result's is the policy's."""
    from burnqed.eval.pass_at import build_eval_result
    from burnqed.eval.result import EvalResult
    from burnqed.eval.settings import EvalSettings
    from burnqed.records.results import FailureReason, TheoremResult
    from burnqed.runner.reuse import inputs_from_settings

    settings = EvalSettings(backend="local", prompt_format="plain-tactic", num_candidates=4, temperature=0.6,
                            top_p=0.9, max_new_tokens=64, timeout_s=30.0, verify=True, stop_at_first=True,
                            concurrency=1)
    older = build_eval_result(
        [[TheoremResult(name="t", proved=False, failure_reason=FailureReason.EXHAUSTED)]], [4], benchmark="b",
        model="tiny", ebm=None, lean_backend="minilean", iteration=0, config_digest="0" * 16, git_commit=None,
        theorem_names=["t"], seed=0, settings=settings, mode=SearchMode.SKETCH)
    written = older.model_dump(mode="json")
    del written["settings"]["config"]  # as schema 9 wrote it: the settings' own fields, no map of keys
    recorded = inputs_from_settings(EvalResult.model_validate({**written, "schema_version": 9})).settings
    assert (recorded["policy.temperature"], recorded["policy.top_p"], recorded["policy.backend"]) == (0.6, 0.9, "local")
    assert not {key for key in recorded if key.startswith("planner.")}


# ------------------------------------------------------------------------------------------ the client


def _free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_no_planner_is_opened_when_the_policy_plans_or_the_mode_writes_no_sketch(store: Store) -> None:
    nowhere = f"http://127.0.0.1:{_free_loopback_port()}"  # nothing listens: opening it would fail at once

    async def opened(sets: list[str]) -> object:
        async with open_planner(load_config(sets=sets), store=store) as planner:
            return planner

    assert asyncio.run(opened(SKETCH)) is None
    assert asyncio.run(opened(["search.mode=step", "planner.backend=sglang", f"planner.url={nowhere}"])) is None
    with pytest.raises(PolicyUnavailableError, match=f"nothing listens on {nowhere} .*or set planner.url"):
        asyncio.run(opened([*SKETCH, "planner.backend=sglang", f"planner.url={nowhere}"]))


@pytest.mark.slow  # waits one health poll (0.5 s)
def test_a_served_planner_answers_health_before_it_is_handed_out_and_is_asked_alone(store: Store) -> None:
    async def plan(url: str) -> tuple[str, list[str]]:
        cfg = load_config(sets=[*SKETCH, "planner.backend=sglang", f"planner.url={url}",
                                f"policy.url=http://127.0.0.1:{_free_loopback_port()}", "policy.ready_timeout_s=5"])
        async with open_planner(cfg, store=store) as planner:
            assert planner is not None and isinstance(planner.inner, SGLangClient)
            from burnqed.policy.base import Sampling

            [answers] = await planner.generate(["theorem t : True := by"], Sampling(n=2, max_new_tokens=8))
            return planner.inner.url, [answer.text for answer in answers]

    with FaultServer() as server:
        server.unhealthy(1)  # warming up: 503 first
        url, texts = asyncio.run(plan(server.url))
        assert url == server.url and texts == ["tactic 0.0", "tactic 0.1"]
        assert len(server.received("/health")) == 2 and len(server.received("/generate")) == 1


@pytest.mark.slow  # three servers
def test_the_planners_context_must_hold_a_sketch(store: Store) -> None:
    async def check(context: int, tokens: int, served: bool) -> None:
        with FaultServer(context_length=context) as server:
            sets = [*SKETCH, f"planner.max_new_tokens={tokens}"]
            sets += ["planner.backend=sglang", f"planner.url={server.url}"] if served else [
                "policy.backend=sglang", f"policy.url={server.url}"]
            cfg = load_config(sets=sets)
            client = SGLangClient.from_config(cfg.planner.client_config(cfg.policy) if served else cfg.policy)
            from burnqed.policy.batching import BatchingPolicy

            planner = BatchingPolicy(client)
            try:
                await check_planner_room(planner, cfg)
            finally:
                await planner.close()

    asyncio.run(check(2048, 1024, served=True))
    with pytest.raises(ConfigError, match=r"planner.max_new_tokens 1024 leaves no room for a sketch prompt in the "
                                          r"planner model's context of 1024 tokens"):
        asyncio.run(check(1024, 1024, served=True))
    with pytest.raises(ConfigError, match=r"the policy \(the planner: planner.backend is unset\) model's context of "
                                          r"512 tokens"):
        asyncio.run(check(512, 1024, served=False))


def test_the_config_file_section_reads_as_documented(tmp_path: Path) -> None:
    file = tmp_path / "burnqed.toml"
    file.write_text('[search]\nmode = "sketch"\n\n[planner]\nbackend = "sglang"\nurl = "http://127.0.0.1:30002"\n'
                    'model = "s3://bucket/models/planner"\nprompt_format = "deepseek-sketch"\ntemperature = 1.0\n',
                    encoding="utf-8")
    planner = load_config(file).planner
    assert planner.served and planner.sent_format(PromptFormat.PLAIN_TACTIC) is PromptFormat.DEEPSEEK_SKETCH
    assert planner.sampling_section(PolicyConfig(top_p=0.8)).top_p == 0.8


@pytest.mark.slow  # loads the tiny model
def test_a_local_planner_is_a_second_model_in_this_process(tiny_model_dir: Path, store: Store) -> None:
    from burnqed.policy.localpolicy import LocalPolicy

    async def opened(tokens: int) -> tuple[str, int]:
        cfg = load_config(sets=[*SKETCH, "planner.backend=local", f"planner.model={tiny_model_dir}",
                                f"planner.max_new_tokens={tokens}", "policy.device=cpu"])
        async with open_planner(cfg, store=store) as planner:
            assert planner is not None and isinstance(planner.inner, LocalPolicy)
            context = planner.inner.model.context_length
            await check_planner_room(planner, cfg)
            return str(planner.inner.model.path), context

    path, context = asyncio.run(opened(16))
    assert path == str(tiny_model_dir)
    with pytest.raises(ConfigError, match=f"planner.max_new_tokens {context} leaves no room for a sketch prompt in "
                                          f"the planner model's context of {context} tokens"):
        asyncio.run(opened(context))


def test_a_constrained_planner_samples_sketches_under_the_grammar_and_nothing_else_does() -> None:
    from burnqed.config import LeanConfig, SearchConfig
    from burnqed.search.sketch_settings import SketchSettings
    from burnqed.stages.search import JobSettings, settings_from_config
    from burnqed.text.sketch_grammar import sketch_grammar

    search, policy = SearchConfig(mode=SearchMode.SKETCH), PolicyConfig()
    free = settings_from_config(search, policy, planner=PlannerConfig())
    assert isinstance(free, SketchSettings) and free.sampling.ebnf is None
    planner = PlannerConfig(constrained=True, max_holes=3, balanced=True)
    constrained = JobSettings.from_config(search, policy, LeanConfig(max_text_chars=5000), planner=planner).engine
    assert isinstance(constrained, SketchSettings)
    grammar = sketch_grammar(3, balanced=True, max_text_chars=5000)
    assert constrained.sampling.ebnf == grammar.ebnf and grammar.longest <= 5000
    assert constrained.subgoal.sampling.ebnf is None  # a subgoal's tactics are sampled free
    step = settings_from_config(SearchConfig(), policy, planner=planner)
    assert step.sampling.ebnf is None
    with pytest.raises(ValueError, match=r"lean.max_text_chars \(300\) is too small"):
        Config.model_validate({"planner": {"constrained": True}, "lean": {"max_text_chars": 300}})
    Config.model_validate({"planner": {"constrained": False}, "lean": {"max_text_chars": 300}})
