"""``hpcgnn report``: the figures of every mode's metrics and of a scaling study; bad inputs."""

import json

import pytest

from hpcgnn.cli.main import main
from tests.graphs import write_random_graph

MODES = {
    "1d": ["--algo", "1d"],
    "halo": ["--algo", "halo"],
    "offload": ["--mode", "offload", "--chunks", "2"],
    "minibatch": ["--mode", "minibatch", "--batch-size", "8", "--fanout", "3,3"],
    "gist": ["--mode", "gist"],
}


def test_report_draws_the_metrics_of_every_mode(tmp_path, capsys):
    # one process: the report runs on rank 0 only, and drawing dominates the time
    path = write_random_graph(tmp_path / "g.h5", n=48, seed=2)
    inputs = []
    for name, flags in MODES.items():
        out = tmp_path / f"{name}.json"
        argv = ["train", str(path), "--epochs", "2", "--hidden", "4", "--quiet", *flags,
                "--metrics", str(out)]
        assert main(argv) == 0, f"train {name} failed"
        inputs.append(str(out))
    study = tmp_path / "scaling.json"
    assert main(["model", "--shape", "1000,8000,16,4", "--procs", "4,16,64",
                 "--out", str(study), "--top", "0"]) == 0
    capsys.readouterr()
    rep = tmp_path / "rep"
    assert main(["report", *inputs, str(study), "--out", str(rep)]) == 0
    for name in ("curves", "phases", "bytes", "exchange", "scaling"):
        for fmt in ("png", "svg"):
            assert (rep / f"{name}.{fmt}").stat().st_size > 1000, name
    index = (rep / "index.md").read_text()
    assert index.count("| fullbatch |") == 2 and "| minibatch |" in index
    assert "## Scaling study: scaling on laptop" in index and "![scaling](scaling.png)" in index
    assert "| peak host MiB |" in index
    for metrics in inputs:  # this hpcgnn's files count from 1, as the curves' x axes
        doc = json.loads(open(metrics).read())
        assert [e["epoch"] for e in doc["epochs"]] == [1, 2], metrics
        peak = doc["memory"]["peak_bytes"]  # every mode's: one rank, a positive count
        assert len(peak) == 1 and peak[0] > 0, metrics
        assert f" | {peak[0] / 2**20:.4g} |" in index, metrics


def test_a_file_without_the_memory_section_has_no_peak():
    from hpcgnn.plots.report import peak_memory

    assert peak_memory({}) is None and peak_memory({"memory": None}) is None
    assert peak_memory({"memory": {"peak_bytes": [3, 7, 5]}}) == 7


def test_the_curves_count_epochs_from_1_in_files_of_every_schema():
    from hpcgnn.plots.report import epoch_numbers

    zero_based = [{"epoch": 0}, {"epoch": 1}]
    assert epoch_numbers({"epochs": zero_based}) == [1, 2]  # no ``run``: before schemas
    assert epoch_numbers({"epochs": zero_based, "run": {"schema_version": 1}}) == [1, 2]
    one_based = {"epochs": [{"epoch": 1}, {"epoch": 2}], "run": {"schema_version": 2}}
    assert epoch_numbers(one_based) == [1, 2]


@pytest.mark.parametrize("content, words", [
    (None, "cannot read"),
    ("{", "not valid JSON"),
    (json.dumps({"epochs": 3}), "neither a metrics file (train --metrics) nor a scaling study"),
    (json.dumps({"epochs": [], "comm": [1]}), "a value the report reads has the wrong type"),
    (json.dumps({"epochs": [{"epoch": "one"}], "comm": {}}), "wrong type or is missing"),
    (json.dumps({"epochs": [{"epoch": 0, "loss": "x"}], "comm": {}}), "wrong type"),
    (json.dumps({"epochs": [], "comm": {}, "time": {"phases": 3}}), "wrong type"),
    (json.dumps({"epochs": [], "comm": {"measured_bytes": {"a": "b"}}}), "wrong type"),
    (json.dumps({"epochs": [], "comm": {}, "memory": {"peak_bytes": ["x"]}}), "wrong type"),
    (json.dumps({"epochs": [], "comm": {}, "memory": [1]}), "wrong type"),
    (json.dumps({"machine": "m", "results": [{"procs": 4, "choices": [{"algo": "1d"}]}]}),
     "missing (KeyError: 'time_s')"),
    (json.dumps({"epochs": [{"epoch": 1, "loss": 1e308}, {"epoch": 2, "loss": -1e308}],
                 "comm": {}}), "epochs[0].loss = 1e+308 is beyond what a figure can draw"),
])
def test_bad_inputs_fail_in_one_line(tmp_path, capsys, content, words):
    path = tmp_path / "m.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", str(path), "--out", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert words in err and len(err.splitlines()) == 1 and not (tmp_path / "r").exists()


def test_a_full_disk_leaves_no_report_directory(tmp_path, capsys, monkeypatch):
    import hpcgnn.plots.report as report
    from hpcgnn.errors import OutputError

    path = write_random_graph(tmp_path / "g.h5", n=30, seed=2)
    metrics = tmp_path / "m.json"
    assert main(["train", str(path), "--epochs", "1", "--quiet", "--metrics", str(metrics)]) == 0

    def full(path, data, what="output"):
        raise OutputError(f"{what} {path}: No space left on device")

    monkeypatch.setattr(report, "atomic_write", full)
    capsys.readouterr()
    assert main(["report", str(metrics), "--out", str(tmp_path / "new" / "rep")]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("flags", [["--algo", "1d"], ["--mode", "minibatch", "--batch-size", "8"],
                                   ["--mode", "offload", "--chunks", "2"]],
                         ids=["1d", "minibatch", "offload"])
def test_the_phase_bars_count_no_second_twice(tmp_path, flags):
    from hpcgnn.plots.report import phase_bars

    path = write_random_graph(tmp_path / "g.h5", n=48, seed=2)
    out = tmp_path / "m.json"
    assert main(["train", str(path), "--epochs", "3", "--quiet", "--metrics", str(out),
                 *flags]) == 0
    doc = json.loads(out.read_text())
    step = sum(e["time_s"] for e in doc["epochs"]) / len(doc["epochs"])
    assert 0 < sum(phase_bars(doc).values()) <= 1.02 * step  # one rank: the bars are its step


def test_labels_and_colours_are_distinct(tmp_path):
    from hpcgnn.plots.report import _colours, load_inputs

    docs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        doc = tmp_path / name / "metrics.json"
        doc.write_text(json.dumps({"epochs": [], "comm": {}, "config": {"algo": "1d"}}))
        docs.append(str(doc))
    runs, _ = load_inputs(docs)
    assert len({r.label for r in runs}) == 2 and runs[0].label.startswith("a/metrics")
    assert len(set(_colours(24))) == 24


def _run(label, **doc):
    from hpcgnn.plots.report import Run

    return Run(label, {"comm": {}, "run": {"schema_version": 2}, **doc})


def test_the_phase_bars_say_what_they_hold():
    from matplotlib.figure import Figure

    from hpcgnn.plots.report import _phases

    full = _run("1d", epochs=[], time={"phases": {"dense_bcast": 0.1, "compute": 0.2}},
                device={"kind": "cpu", "oversubscribed": True})
    fig = Figure()
    _phases(fig, [full])
    assert fig.axes[0].get_title() == "Time per epoch by phase"
    assert "1d: more ranks than cores on a host" in fig._supxlabel.get_text()
    mini = _run("mb", epochs=[], time={"minibatch_phases": {"sample": 0.1}})
    fig = Figure()
    _phases(fig, [full, mini])
    assert fig.axes[0].get_title().endswith("(minibatch runs: their pipeline stages)")


def test_curves_that_coincide_stay_visible_with_validation_and_test():
    from matplotlib.figure import Figure

    from hpcgnn.plots.report import _curves

    epochs = [{"epoch": e, "loss": 1.0 / e, "val_loss": 1.1 / e, "train_acc": 0.5,
               "val_acc": 0.4, "test_acc": 0.45} for e in (1, 2, 3)]
    fig = Figure()
    _curves(fig, [_run("P=1", epochs=epochs), _run("P=4", epochs=epochs)])
    loss, acc = fig.axes[:2]
    assert [ln.get_label() for ln in loss.lines] == ["P=1 (train)", "P=1 (val)", "P=4 (train)",
                                                    "P=4 (val)"]
    assert "P=4 (test)" in [ln.get_label() for ln in acc.lines]
    first, second = loss.lines[0], loss.lines[2]  # the same values, told apart
    assert first.get_linewidth() > second.get_linewidth()
    assert first.get_marker() != second.get_marker()


def test_a_narrow_scaling_range_gets_a_linear_axis_with_labels():
    from matplotlib.figure import Figure

    from hpcgnn.plots.report import Study, _scaling

    choice = {"algo": "1d", "grid": "P", "time_s": 1e-3, "max_rank_bytes": 1.5e6}
    doc = {"machine": "m", "results": [
        {"procs": p, "choices": [{**choice, "max_rank_bytes": 1.5e6 + 1e5 * p}]}
        for p in (2, 4, 8)]}
    fig = Figure()
    _scaling(fig, [Study("s", doc)])
    times, volumes = fig.axes[:2]
    assert volumes.get_yscale() == "linear" and len(volumes.get_yticks()) >= 3
    assert "modelled" in times.get_title()
