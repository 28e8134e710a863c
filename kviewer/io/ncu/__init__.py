"""Nsight Compute: ``.ncu-rep`` reports (:mod:`.report`) and ``ncu --csv`` exports (:mod:`.csv_export`), sharing :mod:`.common`."""
