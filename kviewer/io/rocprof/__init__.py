"""ROCm profilers: rocprof v1 (results.csv :mod:`.v1_csv`, results.db :mod:`.v1_db`), rocprofv2 (:mod:`.v2_csv`) and rocprofv3
(CSV folders :mod:`.v3_csv`, JSON :mod:`.v3_json`), sharing :mod:`.common`."""
