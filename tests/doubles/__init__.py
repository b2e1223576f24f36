"""The doubles that stand in for burnqed's peers in the tests: one line each, the peer and how strict the double
is. Each module's docstring says where it is more lenient than the real peer and why.

- `lean_double.py`: Pantograph's `repl` (0.2.25, 0.3.0-0.3.16), a process: requests parsed as the emulated version
  parses them, that version's reply shapes and scope rules; any tactic not in its list succeeds (no Lean).
- `line_servers.py`: the same Lean peers as objects in this process (`MiniLean`: minilean's server; `DoubleServer`:
  the double above) for `InProcessReplay`, where the wire is not what a test checks; `minilean_worker`: the worker
  a configured pool gets for `{python} -m minilean` under the `minilean_in_process` fixture.
- `comparator_double.py`: Lean's comparator (`lake comparator --config FILE`, the standalone binary), a process in
  the judge's Lake project: its config keys, messages, exit codes and report shape; judges on minilean's fragment,
  comparing the commands' text (stricter), with no kernel replay, nanoda or sandbox.
- `fake_argo.py`: the Argo Server's REST API (v4.1.2): its routes, request decoding and CreateWorkflow /
  SubmitWorkflow refusals; the workflow spec is not type-checked (test_validate does that with Argo's schema).
- `fake_kube.py`: the Kubernetes API server (bearer auth, 401/403/404 `Status`, label selectors, the service proxy
  that drops Authorization) with the Argo Server's gatekeeper behind it; GET only, no RBAC beyond listed paths.
- `fault_server.py`: SGLang's native HTTP API (/generate, /encode, /tokenize, /v1/models, /health) with scripted
  faults; honours temperature 0, stop, max_new_tokens and the context length; refuses sampling_params as SGLang
  0.5.23's API contract and SamplingParams.verify do, and goes down on min_p when deterministic.
- `fake_sglang.py`: `python -m sglang.launch_server` and `burnqed serve --encode-only` as processes for the
  sidecar entrypoint: logs its arguments, checks --sampling-defaults' choices, serves /health only.
- `sglang_shim.py`: `sglang.launch_server` for the rehearsal, answered by `burnqed serve` on the tiny model;
  checks --mem-fraction-static's range, serves --sampling-defaults openai only, refuses unknown arguments.
- `policy_double.py`: a `Policy` (SGLang or the local model) answering from a script; no context limit, sampling
  parameters do not change the answer.
- `ebm_doubles.py`: an `Encoder` returning hash vectors, with a crash on demand; plus small trajectories.
- `filling_disk.py`: a local file system that fills up (ENOSPC) or turns read-only (EROFS) after a byte allowance,
  in-process or around a `burnqed` process; covers Python's own writes, not native writers (pyarrow, safetensors).
- `s3.py`: S3, as moto's server in a thread; any credentials, no consistency or rate limits.
- `json_http.py`: not a double; the threaded JSON HTTP transport fake_kube and fake_argo are served with.
- `run_lean_double.py`: not a double; starts `lean_double.py` from its cached bytecode (a script is compiled at
  every start).
"""
