"""The tests' environment turns torch.compile off (tests/conftest.py, TORCHDYNAMO_DISABLE): a torch that stops
reading the variable, or a conftest that stops setting it, would load torch's inductor again in every process that
imports peft (bitsandbytes compiles its CPU kernels at import), seen only in the suite's time. Without the variable
the same line prints True (torch 2.13: the wrap reads inductor's compiler config)."""

from __future__ import annotations

import subprocess
import sys


def test_a_process_of_the_tests_environment_loads_no_inductor_when_a_function_is_compiled() -> None:
    code = "import sys, torch; torch.compile(lambda x: x + 1); print('torch._inductor.compile_fx' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False"]
