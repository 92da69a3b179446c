"""The memory budget sees the process's address-space limit: a doctored archive is refused before NumPy allocates."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

import specinit
from specinit._validation import process_headroom

resource = pytest.importorskip("resource")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status")

#: Run in a child limited to what it maps after its imports plus ``HEADROOM``; jax is never imported there
#: (it reserves far more address space than it uses).
LIMITED = textwrap.dedent("""
    import json, resource, sys
    from specinit.estimate import SpectralEstimate
    from specinit._validation import check_allocation, memory_limit, process_headroom
    assert "jax" not in sys.modules
    def vm(field):
        with open("/proc/self/status") as handle:
            return next(int(line.split()[1]) * 1024 for line in handle if line.startswith(field + ":"))
    resource.setrlimit(resource.RLIMIT_AS, (vm("VmSize") + {headroom}, resource.RLIM_INFINITY))
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    out = {{"limit": memory_limit(), "headroom": soft - vm("VmSize"), "words": process_headroom()[1]}}
    try:
        check_allocation(2.0 * soft, "n_symbols", "the emission matrix", "hmm.spectral")
    except MemoryError as exc:
        out["allocation"] = str(exc)
    if len(sys.argv) > 1:
        try:
            SpectralEstimate.load(sys.argv[1], max_bytes=int(sys.argv[2]) if len(sys.argv) > 2 else None)
            out["load"] = "loaded"
        except ValueError as exc:
            out["load"] = f"ValueError: {{exc}}"
        except MemoryError as exc:
            out["load"] = f"MemoryError: {{exc!r}}"
    print(json.dumps(out))
""")

HEADROOM = 2**30
DECLARED = 1_200_000_000  # float64 values: 9.6 GB


def _run_limited(*args) -> dict:
    done = subprocess.run([sys.executable, "-c", LIMITED.format(headroom=HEADROOM), *map(str, args)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _doctored(source, target) -> str:
    """``source`` with the member ``param/weights`` declaring ``DECLARED`` float64 values and holding 960 bytes.

    The zip directory and the metadata's record of shapes agree with the header, so only the budget stands between
    the header and NumPy's allocation.
    """
    with np.load(source) as archive:
        meta = json.loads(str(archive["meta"]))
    meta["arrays"]["param/weights"]["shape"] = [DECLARED]
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": (DECLARED,)})
    header = header.getvalue()
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for info in original.infolist():
            if info.filename == "meta.npy":
                text = io.BytesIO()
                np.save(text, np.array(json.dumps(meta)))
                out.writestr(info.filename, text.getvalue())
            elif info.filename == "param/weights.npy":
                out.writestr(info.filename, header + bytes(960))
                out.filelist[-1].file_size = len(header) + 8 * DECLARED
            else:
                out.writestr(info.filename, original.read(info))
    return "param/weights"


def test_memory_limit_is_at_most_what_the_address_space_limit_leaves():
    result = _run_limited()
    assert 0 < result["limit"] <= result["headroom"] <= HEADROOM
    assert result["words"] == "the address-space limit (RLIMIT_AS, ulimit -v)"
    assert "'n_symbols' argument of hmm.spectral" in result["allocation"]
    assert "(what the address-space limit (RLIMIT_AS, ulimit -v) leaves this process)" in result["allocation"]


def test_without_a_process_limit_the_setting_decides():
    if process_headroom() is not None:
        pytest.skip("this process runs under an address-space limit")
    previous = specinit.set_memory_limit(3 * 2**20)
    try:
        assert specinit.memory_limit() == 3 * 2**20
    finally:
        specinit.set_memory_limit(None)
    assert specinit.memory_limit() == previous


def test_a_member_declaring_more_than_the_address_space_allows_is_refused_naming_file_member_and_limit(tmp_path):
    from specinit.models import gmm

    rng = np.random.default_rng(0)
    estimate = gmm.spectral(np.concatenate([rng.normal(-3, 1, (150, 2)), rng.normal(3, 1, (150, 2))]), 2)
    estimate.save(tmp_path / "fit.npz")
    member = _doctored(tmp_path / "fit.npz", tmp_path / "doctored.npz")
    message = _run_limited(tmp_path / "doctored.npz")["load"]
    assert message.startswith("ValueError: "), message
    assert str(tmp_path / "doctored.npz") in message
    assert f"member {member!r}, declares shape ({DECLARED},) of float64" in message
    assert "8.94 GiB" in message and "address-space limit (RLIMIT_AS, ulimit -v)" in message
    # a max_bytes above what the process can map does not let it through: the limit refuses it
    message = _run_limited(tmp_path / "doctored.npz", 2**40)["load"]
    assert message.startswith("ValueError: ")
    assert "that the address-space limit (RLIMIT_AS, ulimit -v) leaves" in message
    assert f"member {member!r}" in message and "SpectralEstimate.load" in message
    # the intact file loads under the same limit
    assert _run_limited(tmp_path / "fit.npz")["load"] == "loaded"
