"""``python -m segnet.bench``: the benchmark (``segnet-bench``) by its short name."""

if __name__ == "__main__":
    from segnet.commands.bench import main

    main()
