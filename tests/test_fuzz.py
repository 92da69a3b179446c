"""The fuzz suite: every target of ``tests/fuzz_targets.py`` in a child process with an address-space limit and a
time limit. A signal (a crash in compiled code), a hang, an allocation over the limit or an unclear error fails."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz_targets import TARGETS

#: Address space of the child: the libraries' own reservations fit, a runaway allocation does not.
ADDRESS_SPACE = 3 * 2**30
#: Examples per target and the wall-clock limit of one child (seconds).
MAX_EXAMPLES, TIME_LIMIT = 400, 600


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_no_input_crashes_hangs_or_exhausts_memory(target):
    root = Path(__file__).resolve().parents[1]
    try:
        done = subprocess.run([sys.executable, "-m", "tests.fuzz_targets", target, str(MAX_EXAMPLES),
                               str(ADDRESS_SPACE)], cwd=root, capture_output=True, text=True, timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{target}: no answer within {TIME_LIMIT} s (a hang); output so far:\n{exc.stdout}\n{exc.stderr}")
    output = done.stdout + done.stderr
    assert done.returncode >= 0, f"{target}: killed by signal {-done.returncode} (a crash)\n{output[-4000:]}"
    assert done.returncode == 0, f"{target}: an example ended unclearly\n{output[-6000:]}"
    summary = re.search(rf"^{target}: (\d+) examples, (\d+) results, (\d+) clear errors$", done.stdout, re.M)
    assert summary, output[-2000:]
    examples, results, errors = map(int, summary.groups())
    # derandomized: every run feeds the same examples; both outcomes occur, so neither path is vacuous
    assert examples >= MAX_EXAMPLES and results > 0 and errors > 0, summary.group(0)
