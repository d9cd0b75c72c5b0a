"""``python -m segnet.predict``: the predict command (``segnet-predict``) by its short name.
Imported, it is the serving API it always was (``from segnet.predict import Predictor``)."""

from segnet.serving.predict import *  # noqa: F403  (the names scripts import from here)

if __name__ == "__main__":
    from segnet.commands.predict import main

    main()
