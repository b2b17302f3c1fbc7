"""The viewer's outline, without the UI: what folds, how rows map to lines, how a line shows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sleuth.app.outline import Fold, FoldDetector, Outline, display_text, line_style, record_line


def detect(lines: list[str], block: int = 7) -> list[Fold]:
    d = FoldDetector()
    found = []
    for i in range(0, len(lines), block):  # fed in blocks, as the scan worker does
        found += d.feed(lines[i : i + block])
    return found + d.finish()


def test_a_config_dump_folds_to_one_row_and_short_blocks_stay():
    dump = ["LlamaConfig {"] + [f'  "k{i}": {i},' for i in range(30)] + ['  "nested": {', '    "a": [1, 2]', "  }", "}"]
    lines = ["before", *dump, "after", "x = {", "  'a': 1", "}"]
    [fold] = detect(lines)
    assert (fold.start, fold.end, fold.kind) == (1, 1 + len(dump), "dump")
    assert fold.label == f"{len(dump)} lines of JSON/config: LlamaConfig {{"


def test_an_opener_followed_by_prose_is_not_a_dump():
    lines = ["config = {"] + ["this is a sentence that is not json"] * 3 + ['  "a": 1'] * 10 + ["}"]
    assert [f.kind for f in detect(lines)] == ["repeat", "repeat"]


def test_repeated_warnings_fold_with_a_count_and_keep_their_gist():
    warn = ["/venv/lib/torch/flex_attention.py:1459: UserWarning: flex_attention called without torch.compile()", "  warnings.warn("]
    lines = ["start"] + warn * 50 + ["end"] + ["same"] * 3 + ["two"] * 2
    folds = detect(lines)
    assert [(f.start, f.end) for f in folds] == [(1, 101), (102, 105)]
    assert folds[0].label == "UserWarning: flex_attention called without torch.compile() (+1 line)  ×50"
    assert folds[1].label == "same  ×3"


def test_progress_bars_collapse_and_errors_are_marked():
    assert display_text("10%|█ \r50%|█████ \r100%|██████████") == ("100%|██████████", 2)
    assert display_text("plain") == ("plain", 0)
    assert line_style("Traceback (most recent call last):") == "error"
    assert line_style('  File "train.py", line 88, in drafter') == "traceback"
    assert line_style("RuntimeError: Detected that you are using FX to symbolically trace") == "error"
    assert line_style("torch._dynamo.exc.BackendCompilerFailed: backend='inductor'") == "error"
    assert line_style("UserWarning: careful") == "warning"
    assert line_style("step 3: loss 2.1") == ""
    assert record_line('@@sleuth:0123abcd {"kind": "done"}') == '{"kind": "done"}'
    assert line_style('@@sleuth:0123abcd {"kind": "done"}') == "record"


@settings(max_examples=200, deadline=None)
@given(
    spans=st.lists(st.tuples(st.integers(0, 3), st.integers(2, 6)), max_size=12),
    opened=st.sets(st.integers(0, 11)),
)
def test_rows_and_lines_map_both_ways(spans, opened):
    folds, at = [], 0
    for gap, size in spans:
        at += gap
        folds.append(Fold(at, at + size, "repeat", f"f{at}"))
        at += size
    total = at + 3
    outline = Outline()
    outline.add(folds[: len(folds) // 2])
    outline.add(folds[len(folds) // 2 :])  # added in two goes, like a scan
    for i in opened:
        if i < len(folds):
            outline.toggle(folds[i])
    shown = [outline.at_row(r) for r in range(outline.rows(total))]
    # every line is on exactly one row: as itself, or inside the collapsed fold on that row
    covered = []
    for line, fold in shown:
        covered += list(range(fold.start, fold.end)) if fold else [line]
    assert covered == list(range(total))
    for line in range(total):
        row = outline.row_of(line)
        got, fold = outline.at_row(row)
        assert (fold is not None and fold.start <= line < fold.end) or got == line
