"""The session layer: what a window (or the headless screenshot path, or the CLI) has open and how
it is viewed, without Qt.

Between ``analysis``/``io`` below and the Qt widgets in ``ui`` above: view models (tracks, level of
detail, table columns, filter expressions, formatting, the colour palette) that widgets draw and the
CLI and headless paths reuse. import-linter keeps it free of PySide6 and pyqtgraph.
"""

import lazy_loader

# submodules (and the names in __init__.pyi) are imported on first use
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
