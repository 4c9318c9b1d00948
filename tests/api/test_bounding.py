from ipykeep.api.bounding import bound_text


def test_short_text_is_returned_whole():
    b = bound_text("hello\n", 100)
    assert b.text == "hello\n" and not b.truncated and b.total_lines == 1


def test_long_text_keeps_head_and_tail_and_says_where_the_rest_is():
    text = "".join(f"line {i}\n" for i in range(3000))
    b = bound_text(text, 2000, full_path="/p/full.txt", uri="ipykeep://artifacts/k1/x.txt")
    assert b.truncated
    assert len(b.text) <= 2000
    assert b.text.startswith("line 0\n")
    assert b.text.rstrip().endswith("line 2999")
    assert (
        "3,000 lines" in b.text
        and "/p/full.txt" in b.text
        and "ipykeep://artifacts/k1/x.txt" in b.text
    )
    # head and tail are cut on line boundaries
    head = b.text.split("[…")[0]
    assert head.endswith("\n")


def test_single_huge_line_is_bounded():
    b = bound_text("x" * 100_000, 1000)
    assert b.truncated and len(b.text) <= 1000 and "100,000 chars" in b.text
