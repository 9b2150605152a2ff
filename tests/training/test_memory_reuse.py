"""After the first epoch a full-batch epoch touches no new memory (issue 26).

``hpcgnn train`` tells glibc to keep freed memory (:func:`hpcgnn.utils.memory.
keep_freed_memory`), so the next epoch's temporaries of the same shapes reuse the last
epoch's pages; each epoch's ``new_pages`` (minor page faults during its step) shows it.
The runs are subprocesses: the allocator setting is per process.
"""

import json
import os
import statistics
import subprocess
import sys

import pytest

from tests.graphs import write_random_graph

EPOCHS = 20


def epoch_pages(tmp_path, keep: str) -> list[int]:
    graph = tmp_path / "g.h5"
    if not graph.exists():
        write_random_graph(graph, n=4000, features=300, avg_degree=6.0, seed=3)
    out = tmp_path / f"m{keep}.json"
    env = {**os.environ, "HPCGNN_KEEP_MEMORY": keep}
    subprocess.run(
        [sys.executable, "-m", "hpcgnn", "train", str(graph), "--epochs", str(EPOCHS),
         "--hidden", "64", "--threads", "1", "--eval-every", "0", "--quiet",
         "--metrics", str(out)],
        check=True, env=env, stdout=subprocess.DEVNULL, timeout=240,
    )
    return [e["new_pages"] for e in json.loads(out.read_text())["epochs"]]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_epochs_after_the_first_touch_no_new_pages(tmp_path):
    # An epoch now and then faults in 250-2,300 pages: the heap grew (glibc's
    # ``mallinfo2().arena`` rises by as much), because its free blocks were too
    # fragmented for one of the epoch's temporaries. Where the small allocations between
    # the big tensors land changes with the address-space layout and Python's string
    # hashing, so the number of such epochs varies from run to run (0-3 of 18 in 25 runs
    # here, 4-6 seen now and then, ASLR and PYTHONHASHSEED fixed repeat a run exactly).
    # The bound is on the typical epoch, which a broken reuse raises to every epoch's
    # temporaries, and loosely on how often the heap grows, not on their sum.
    pages = epoch_pages(tmp_path, "1")
    later = pages[2:]
    assert statistics.median(later) <= 4, pages
    bursts = [p for p in later if p > 64]
    assert len(bursts) <= len(later) // 3, pages
