"""ROCm profilers: rocprof v1 (results.csv :mod:`.v1_csv`, results.db :mod:`.v1_db`), rocprofv2 (:mod:`.v2_csv`) and rocprofv3
(CSV folders :mod:`.v3_csv`, JSON :mod:`.v3_json`), sharing :mod:`.common`."""

import lazy_loader

# submodules (and the names in __init__.pyi) are imported on first use
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
