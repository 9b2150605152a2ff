import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from hpcgnn.errors import ConfigError
from hpcgnn.kernels.cuda_modules import (
    CUDA_DIR_ENV,
    NAME_EXPRESSIONS,
    c_type,
    cuda_dir,
    external_stream,
    source_text,
)

#: The ``extern "C"`` kernels the dispatch launches by name.
EXTERN_C = {
    "dropout.cu": ("hash_keep", "hash_pair_keep"),
    "sampling.cu": ("its_round", "uniform_round", "row_keys", "segment_cumsum"),
}


def test_cuda_dir_is_next_to_the_package_or_overridden(monkeypatch, tmp_path):
    monkeypatch.delenv(CUDA_DIR_ENV, raising=False)
    found = cuda_dir()
    assert found.name == "cuda" and {*NAME_EXPRESSIONS, *EXTERN_C} <= {
        p.name for p in found.glob("*.cu")
    }
    monkeypatch.setenv(CUDA_DIR_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match=CUDA_DIR_ENV):
        cuda_dir()


def test_cuda_dir_finds_the_copy_an_installed_wheel_carries(monkeypatch, tmp_path):
    import hpcgnn.kernels.cuda_modules as cm

    shipped = tmp_path / "hpcgnn" / "_cuda"  # site-packages/hpcgnn/_cuda, no cuda/ beside
    shipped.mkdir(parents=True)
    (shipped / "rows.cu").write_text("// rows")
    monkeypatch.delenv(CUDA_DIR_ENV, raising=False)
    monkeypatch.setattr(cm, "__file__", str(tmp_path / "hpcgnn" / "kernels" / "cuda_modules.py"))
    assert cuda_dir() == shipped.resolve()


class _TorchStream:
    """A torch CUDA stream as CuPy sees it: a pointer and the CUDA stream protocol."""

    cuda_stream = 0x1234

    def __cuda_stream__(self):
        return (0, self.cuda_stream)


def test_external_stream_hands_cupy_the_stream_object_or_its_pointer():
    calls = []
    new = SimpleNamespace(cuda=SimpleNamespace(
        Stream=SimpleNamespace(from_external=lambda obj: calls.append(("from_external", obj))),
        ExternalStream=lambda ptr: calls.append(("ExternalStream", ptr)),
    ))
    stream = _TorchStream()
    external_stream(new, stream)  # CuPy >= 14: the protocol object, never a bare int
    old = SimpleNamespace(cuda=SimpleNamespace(
        Stream=SimpleNamespace(), ExternalStream=new.cuda.ExternalStream
    ))
    external_stream(old, stream)  # older CuPy: the raw pointer
    external_stream(new, SimpleNamespace(cuda_stream=7))  # a torch without the protocol
    assert calls == [("from_external", stream), ("ExternalStream", 0x1234),
                     ("ExternalStream", 7)]


def test_c_types():
    assert c_type("int64") == "long long"
    with pytest.raises(TypeError, match="float16"):
        c_type("float16")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_every_source_compiles_and_has_its_kernels(tmp_path):
    """The text CuPy compiles (headers inlined), for one arch here; ``make ptx`` does all."""
    folder = cuda_dir()
    for src in sorted(folder.glob("*.cu")):
        code = tmp_path / src.name
        code.write_text(source_text(folder, src.name))
        assert "#include" not in code.read_text()
        ptx = tmp_path / f"{src.stem}.ptx"
        subprocess.run(
            ["nvcc", "--ptx", "-std=c++17", "-DHPCGNN_INSTANTIATE", "-arch=sm_80",
             "-o", str(ptx), str(code)],
            check=True, capture_output=True,
        )
        entries = re.findall(r"\.entry\s+(\w+)\(", ptx.read_text())
        for name in EXTERN_C.get(src.name, ()):
            assert name in entries, (src.name, name)
        templates = NAME_EXPRESSIONS.get(src.name, ())
        for name in {t.split("<")[0] for t in templates}:
            mangled = f"{len(name)}{name}I"  # the name as Itanium mangling spells it (edge_softmax
            # is no match for edge_softmax_backward's entries)
            assert sum(mangled in e for e in entries) == sum(
                t.startswith(name + "<") for t in templates
            ), (src.name, name)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_packed_row_kernels_move_16_byte_vectors(tmp_path):
    """rows.cu's ``hpcgnn_vec16`` kernels load and store their values 16 bytes at a time
    (``.v4.f32`` / ``.v2.f64``), the scalar ones element by element, as NVRTC would compile
    them (no FMA contraction)."""
    code = tmp_path / "rows.cu"
    code.write_text(source_text(cuda_dir(), "rows.cu"))
    ptx = tmp_path / "rows.ptx"
    subprocess.run(["nvcc", "--ptx", "-std=c++17", "--fmad=false", "-DHPCGNN_INSTANTIATE",
                    "-arch=sm_80", "-o", str(ptx), str(code)], check=True, capture_output=True)
    bodies = re.findall(r"\.entry\s+(\w+)\((.*?)\n\}", ptx.read_text(), re.S)
    packed = {name: body for name, body in bodies if "hpcgnn_vec16" in name}
    assert len(packed) == sum("hpcgnn_vec16" in n for n in NAME_EXPRESSIONS["rows.cu"]) == 14
    for name, body in bodies:
        moves = re.findall(r"\b(ld|st)\.global(?:\.nc)?(\.v\d)?\.(f32|f64)\b", body)
        assert {op for op, _, _ in moves} == {"ld", "st"}, name
        want = {"f32": ".v4", "f64": ".v2"} if name in packed else {"f32": "", "f64": ""}
        assert all(vec == want[kind] for _, vec, kind in moves), (name, moves)
