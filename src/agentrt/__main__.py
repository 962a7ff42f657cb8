"""``python -m agentrt``: the same as the ``agentrt`` console script."""

from agentrt.cli import main

if __name__ == "__main__":
    main()
