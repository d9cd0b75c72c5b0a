"""The prediction panels' legend: every class with its colour, and void (a label value
past the palette, painted black in the truth column) named too."""

from segnet.training.callbacks.render import legend


def test_void_past_the_palette_gets_a_black_swatch_in_the_legend():
    palette = [(255, 0, 0), (0, 200, 0)]
    classes = legend(600, ["road", "car"], palette)
    with_void = legend(600, ["road", "car", "void (not scored)"], palette)
    black = lambda im: int((im.sum(-1) == 0).sum())  # noqa: E731
    assert black(with_void) >= black(classes) + 12 * 12  # the filled swatch, and its name
