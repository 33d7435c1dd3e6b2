"""make clean-orphans (issue 26): files of removed runs are listed, and removed on confirmation."""

import sys

from dpaudit.orphans import main, orphan_files, remove

UNTRACKED = ["results/models/toy/old_run/train.json", "results/report.html", "logs/train_model/toy/old_run.log",
             "benchmarks/train_model/toy/old_run.tsv", "resources/raw/adult/adult.data", "config/mine.yaml",
             "notes.txt", "results/batches/train_model/toy/b0123456789ab.json", ""]


def test_only_the_output_folders_and_never_the_report_downloads_or_batch_records():
    assert orphan_files(UNTRACKED) == ["benchmarks/train_model/toy/old_run.tsv", "logs/train_model/toy/old_run.log",
                                       "results/models/toy/old_run/train.json"]


def test_remove_deletes_files_and_the_folders_they_leave_empty(tmp_path):
    for name in UNTRACKED[:4]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    (tmp_path / "results" / "models" / "toy" / "kept.json").write_text("x")
    assert remove(orphan_files(UNTRACKED), tmp_path) == 3
    assert not (tmp_path / "results" / "models" / "toy" / "old_run").exists()
    assert (tmp_path / "results" / "models" / "toy" / "kept.json").exists()
    assert (tmp_path / "results" / "report.html").exists()
    assert not (tmp_path / "logs").exists()


def test_main_lists_then_removes_with_confirmation(tmp_path, capsys):
    orphan = tmp_path / "results" / "models" / "toy" / "old_run" / "train.json"
    orphan.parent.mkdir(parents=True)
    orphan.write_text("{}")
    fake = [sys.executable, "-c", "print('results/models/toy/old_run/train.json'); print('results/report.html')",
            "--list-untracked"]
    assert main(["--workdir", str(tmp_path), "--", *fake]) == 0
    out = capsys.readouterr().out
    assert "1 file(s)" in out and "  results/models/toy/old_run/train.json" in out and "CONFIRM=1" in out
    assert orphan.exists()
    assert main(["--remove", "--workdir", str(tmp_path), "--", *fake]) == 0
    assert not orphan.exists() and "removed 1 file(s)" in capsys.readouterr().out
