from pathlib import Path

from hpcgnn.utils.shipped import PACKAGE, shipped_dir


def test_a_source_checkout_finds_the_top_level_folders():
    assert shipped_dir("configs", "*.json") == PACKAGE.parent / "configs"
    assert (shipped_dir("jobs", "*.sh") / "slurm.sh").is_file()
    assert (shipped_dir("configs", "*.json") / "machines" / "laptop.json").is_file()


def test_an_installed_wheel_finds_its_copies(tmp_path: Path):
    package = tmp_path / "site-packages" / "hpcgnn"
    (package / "_configs" / "machines").mkdir(parents=True)
    assert shipped_dir("configs", "*.json", package) == tmp_path / "site-packages" / "configs"
    (package / "_configs" / "machines" / "laptop.json").write_text("{}")
    assert shipped_dir("configs", "*.json", package) == package / "_configs"
