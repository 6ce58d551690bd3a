"""bench/common.machine_line names the CPU a bench's absolute figures come from (int8 kernels ran ~2x
faster with AVX-512 VNNI than on an AVX2-only EPYC, so figures from two machines differ by that much)."""
from __future__ import annotations

from bench.common import machine_line

EPYC = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nmodel name\t: AMD EPYC\n"
XEON = "model name\t: Intel Xeon Platinum\nflags\t\t: avx2 avx512f avx512_vnni amx_int8\n"


def test_names_the_model_and_only_the_int8_sets_it_has():
    line = machine_line(EPYC)
    assert line.startswith("machine: AMD EPYC; int8: avx2; ")
    assert "vnni" not in line
    assert "int8: avx2,avx512f,avx512_vnni,amx_int8;" in machine_line(XEON)


def test_a_machine_without_cpuinfo_still_gets_a_line():
    line = machine_line("")
    assert line.startswith("machine: ") and "int8: none of avx2/" in line and " cores; load " in line
