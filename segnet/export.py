"""``python -m segnet.export``: the export command (``segnet-export``) by its short name.
Imported, it is the export API it always was (``from segnet.export import export_onnx``)."""

from segnet.serving.export import *  # noqa: F403  (the names scripts import from here)

if __name__ == "__main__":
    from segnet.commands.export import main

    main()
