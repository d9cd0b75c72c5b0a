"""The prediction panels' legend: every class with its colour, and void (a label value
past the palette, painted black in the truth column) named too."""

from segnet.training.callbacks.render import legend


def test_void_past_the_palette_gets_a_black_swatch_in_the_legend():
    palette = [(255, 0, 0), (0, 200, 0)]
    classes = legend(600, ["road", "car"], palette)
    with_void = legend(600, ["road", "car", "void (not scored)"], palette)
    black = lambda im: int((im.sum(-1) == 0).sum())  # noqa: E731
    assert black(with_void) >= black(classes) + 12 * 12  # the filled swatch, and its name


def test_void_is_not_painted_as_a_black_background():
    """Where the background is black (two classes read from black-and-white masks), void
    takes another colour in the truth column and the legend; else it stays black."""
    import torch

    from segnet.data.palette import label_palette, with_void_colour
    from segnet.training.callbacks.render import sample_panels

    palette = with_void_colour(label_palette(2))
    label = torch.tensor([[0, 1, 2]])
    _, truth, _ = sample_panels(torch.zeros(1, 1, 3), label, torch.zeros(1, 3, dtype=torch.long),
                                palette)  # fmt: skip
    colours = [tuple(c) for c in truth[0].tolist()]
    assert len(set(colours)) == 3 and colours[2] == (224, 224, 192)
    assert with_void_colour([(255, 0, 0), (0, 200, 0)])[-1] == (0, 0, 0)
    taken = [(0, 0, 0), (224, 224, 192), (255, 255, 255)]
    assert with_void_colour(taken)[-1] == (1, 1, 1)  # some colour no class has
