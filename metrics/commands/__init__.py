"""The metrics' commands: each module holds one command's options and its ``main(argv=None)``;
``grove evaluate``, ``grove pointing``, ``grove anet-entities``, ``grove vidstg``, ``grove mevis`` and
``grove threshold-sweep`` run them."""
