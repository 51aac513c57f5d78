"""``python -m c2v_rag.cli``: the same as the ``c2v-rag`` command (``torchrun -m c2v_rag.cli train ...``)."""

import sys

from c2v_rag.cli.app import main

sys.exit(main())
