"""The NVRTC check of ``make nvrtc``: its pure parts without CuPy, the real check with it."""

import io
import struct
import subprocess
import sys

import pytest

from hpcgnn.kernels import cuda_modules as cm
from hpcgnn.kernels import nvrtc_check as nc


def test_parse_archs():
    assert nc.parse_archs("sm_80,sm_90") == ("80", "90")
    assert nc.parse_archs(" 80 , sm_90,sm_80") == ("80", "90")
    assert nc.parse_archs("sm_100") == ("100",)
    for bad in ("", "sm_7", "sm_90a", "compute_80", "sm_80,,sm_90", "ampere"):
        with pytest.raises(ValueError):
            nc.parse_archs(bad)


def test_strip_comments_keeps_strings_and_lines():
    code = 'a // x "y"\nb /* c\nd */ e "f // g" \'/\'\n'
    stripped = nc.strip_comments(code)
    assert stripped.count("\n") == code.count("\n")
    assert "x" not in stripped and "c" not in stripped and "d" not in stripped
    assert '"f // g"' in stripped and "'/'" in stripped and "e" in stripped


SOURCE = r'''
// extern "C" __global__ void commented(int* x) {}
/* extern "C" __global__ void also_commented(int* x) {} */
extern "C" __global__ void plain(const float* __restrict__ x, long long n) {}
extern "C" __global__ __launch_bounds__(256) void bounded(int* x) {}
extern "C" __device__ float helper(float x) { return x; }
template <typename T> __global__ void templated(T* x) {}
__global__ void cxx_linkage(int* x) {}
extern "C" {
__global__ void in_block_a(int* x) { if (x) { x[0] = 1; } }
__device__ int not_a_kernel(int y) { return y; }
__global__ void in_block_b(int* x) {}
}
__global__ void after_block(int* x) {}
'''


def test_extern_c_kernels():
    assert nc.extern_c_kernels(SOURCE) == ("plain", "bounded", "in_block_a", "in_block_b")


def test_extern_c_kernels_of_the_sources():
    """The kernels the dispatch launches by their C name are found in the loader's text."""
    folder = cm.cuda_dir()
    launched = {"dropout.cu": {"hash_keep", "hash_pair_keep"},
                "sampling.cu": {"its_round", "uniform_round", "row_keys", "segment_cumsum"}}
    for source, names in launched.items():
        assert names <= set(nc.extern_c_kernels(cm.source_text(folder, source))), source
    for source in cm.NAME_EXPRESSIONS:  # template-only sources
        assert nc.extern_c_kernels(cm.source_text(folder, source)) == (), source


PTX = """
.version 8.0
.target sm_80
.visible .func  (.param .b32 func_retval0) helper(.param .b32 helper_param_0)
.visible .entry plain(
        .param .u64 plain_param_0
)
.weak .entry _Z9templatedIfEvPT_(
        .param .u64 _Z9templatedIfEvPT__param_0
)
"""


def test_binary_entries_of_ptx():
    assert nc.binary_entries(PTX) == {"plain", "_Z9templatedIfEvPT_"}
    assert nc.binary_entries(PTX.encode()) == {"plain", "_Z9templatedIfEvPT_"}
    assert nc.binary_kind(PTX) == "ptx"


def _elf(symbols):
    """A minimal little-endian ELF64 with a symbol table of (name, info, other, shndx)."""
    strtab = b"\0"
    entries = [struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0)]
    for name, info, other, shndx in symbols:
        entries.append(struct.pack("<IBBHQQ", len(strtab), info, other, shndx, 0, 0))
        strtab += name.encode() + b"\0"
    symtab = b"".join(entries)
    shstrtab = b"\0.shstrtab\0.strtab\0.symtab\0"
    body_off = 64
    offsets = [body_off, body_off + len(shstrtab), body_off + len(shstrtab) + len(strtab)]
    shoff = offsets[2] + len(symtab)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, 4, 1)
    sections = [
        struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        struct.pack("<IIQQQQIIQQ", 1, 3, 0, 0, offsets[0], len(shstrtab), 0, 0, 1, 0),
        struct.pack("<IIQQQQIIQQ", 11, 3, 0, 0, offsets[1], len(strtab), 0, 0, 1, 0),
        struct.pack("<IIQQQQIIQQ", 19, 2, 0, 0, offsets[2], len(symtab), 2, 1, 8, 24),
    ]
    return bytes(header) + shstrtab + strtab + symtab + b"".join(sections)


def test_binary_entries_of_a_cubin():
    """Kernels: defined functions marked STO_CUDA_ENTRY (0x10), as NVRTC's cubins have them."""
    cubin = _elf([
        ("kernel_c", 0x12, 0x10, 9),          # STB_GLOBAL | STT_FUNC, entry
        ("_Z1kIiEvPT_", 0x22, 0x10, 10),      # STB_WEAK | STT_FUNC (a template), entry
        ("$f$device_fn", 0x02, 0x00, 9),      # a device function that was not inlined
        (".text.kernel_c", 0x03, 0x00, 9),    # section symbol
        ("undefined_entry", 0x12, 0x10, 0),   # not defined here
    ])
    assert nc.binary_kind(cubin) == "cubin"
    assert nc.binary_entries(cubin) == {"kernel_c", "_Z1kIiEvPT_"}
    with pytest.raises(ValueError, match="ELF"):
        nc.binary_entries(b"\x7fELF\x01\x01" + bytes(58))  # 32-bit


def test_effective_flags_take_the_last_occurrence():
    flags = nc.effective_flags(
        ["-std=c++17", "--ftz=false", "--fmad=false", "-I/x", "-ftz=true", "-arch=sm_80"])
    assert flags == {"ftz": "true", "fmad": "false"}
    assert nc.effective_flags(["--use_fast_math", "--prec-div=true"]) == {
        "ftz": "true", "fmad": "true", "prec-div": "true", "prec-sqrt": "false"}
    assert nc.effective_flags(["-fmad=False"]) == {"fmad": "false"}


def test_flag_problems():
    loader = ("-std=c++17", "--ftz=false", "--fmad=false")
    cupy_path = (*loader, "-ftz=true", "-arch=sm_80", "--device-as-default-execution-space")
    (problem,) = nc.flag_problems(loader, cupy_path)
    assert "--ftz=false" in problem and "--ftz=true" in problem
    assert nc.flag_problems(("-std=c++17", "--fmad=false"), cupy_path) == []
    assert nc.flag_problems(("-std=c++17",), ("-std=c++17", "-ftz=true")) == []


def test_name_problems():
    exprs = ("k<float>", "k<double>")
    mapping = {"k<float>": "_Z1kIfEvPT_", "k<double>": "_Z1kIdEvPT_"}
    entries = {"_Z1kIfEvPT_", "_Z1kIdEvPT_", "plain"}
    assert nc.name_problems(exprs, mapping, ("plain",), entries) == []
    problems = nc.name_problems(
        exprs, {"k<float>": "_Z1kIfEvPT_", "k<double>": ""}, ("plain", "gone"),
        {"plain"})
    assert len(problems) == 3
    assert "k<float>" in problems[0] and "_Z1kIfEvPT_" in problems[0]
    assert "k<double>" in problems[1] and "no lowered name" in problems[1]
    assert "gone" in problems[2]
    assert nc.name_problems(exprs, None, (), entries)[0].endswith("has no lowered name")


def test_kernel_summary():
    summary = nc.kernel_summary(("g<float, int>", "g<double, int>", "h<int>"), ("c",))
    assert summary == "4 kernels: g x2, h, c"
    assert nc.kernel_summary((), ("a",)) == "1 kernel: a"


def test_loader_options_are_the_loaders():
    assert nc.loader_options() == tuple(getattr(cm, "COMPILE_OPTIONS", nc.FALLBACK_OPTIONS))


def test_importing_the_check_loads_neither_torch_nor_cupy():
    code = ("import sys, hpcgnn.kernels.nvrtc_check; "
            "print(sorted({'torch', 'cupy'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_bad_arch_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        nc.main(["--arch", "sm_7"])
    assert exit_info.value.code == 2
    assert "bad arch 'sm_7'" in capsys.readouterr().err


def test_without_cupy_one_clear_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    assert nc.main(["--arch", "sm_80"]) == 2
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("nvrtc_check: FAIL cannot import CuPy") and "make nvrtc" in line


def test_the_real_check():
    """Every source through CuPy's RawModule path for sm_80 (``make nvrtc`` does 12 and 13)."""
    pytest.importorskip("cupy")
    out = io.StringIO()
    try:
        problems = nc.run(("80",), out=out)
    except nc.CheckError as e:  # this CuPy has no NVRTC, or another private compile path
        pytest.skip(str(e))
    report = out.getvalue()
    assert problems == 0, report
    for path in cm.cuda_dir().glob("*.cu"):
        assert f"nvrtc_check: {path.name} sm_80 ok: " in report, report
