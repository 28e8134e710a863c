"""PyTorch profiler (Kineto) Chrome-trace JSON.

What the files look like
------------------------
``torch.profiler`` (through Kineto) writes one JSON object: a few header keys (``schemaVersion``,
``deviceProperties``, ``distributedInfo``, CUDA/CUPTI or HIP/roctracer versions, ``trace_id``,
``baseTimeNanoseconds``) and ``traceEvents``, a Chrome-trace event list. Complete events
(``"ph": "X"``) carry everything kviewer shows; flow (``s``/``f``), instant (``i``) and metadata
(``M``) events are not needed because every GPU activity and the API call that launched it carry the
same ``correlation`` arg (the ``ac2g``/``launch`` flows only repeat that pairing).

Variants handled (each has a real sample in ../shared/samples/torch):

* current schema: lower-case categories (``cpu_op``, ``cuda_runtime``, ``kernel``, ``gpu_memcpy``…),
  arg ``External id``; float ``ts`` in µs relative to ``baseTimeNanoseconds``;
* older files (2023) without ``baseTimeNanoseconds``: integer ``ts`` in absolute epoch µs;
* the 2021 schema (PyTorch 1.8/1.9): capitalised categories (``Operator``, ``Runtime``, ``Kernel``,
  ``Memcpy``, ``Memset``), arg ``external id``, string tids (``"stream 7"``, ``"25738"``);
* ROCm (roctracer): HIP calls under ``cuda_runtime`` with grid/block/kernel args; kernels may lack
  grid/block and memcpys their byte count, which are then taken from the launching call;
* GPU-only and CPU-only traces, single-line files, ``distributedInfo`` ranks;
* truncated files (the writer died, a cut download or ``.gz``): every complete event is loaded and
  a warning says so.

``ts`` and ``dur`` are always microseconds whatever ``displayTimeUnit`` says (that key only sets the
unit chrome://tracing displays). Times become int64 ns exactly as ``round(us * 1000)``; absolute
epoch timestamps get an integer origin subtracted before scaling so no digit is lost.

Where things go
---------------
* ``kernel``/``Kernel`` -> ``kernels``; ``gpu_memcpy``/``Memcpy`` and ``gpu_memset``/``Memset`` ->
  ``gpu_ops``.
* Every other complete event -> ``cpu_slices`` with category ``runtime`` (``*_runtime``,
  ``Runtime``), ``driver`` (``*_driver``), ``op`` (``cpu_op``, ``Operator``), ``python``
  (``python_function``), ``annotation`` (``user_annotation``), ``sync`` (``cuda_sync``) or
  ``other``. ``gpu_user_annotation`` ranges (``record_function`` ranges as Kineto projects them onto
  a GPU stream) become category ``gpu_annotation``; like ``cuda_sync`` they live on a GPU track, so
  their ``pid``/``tid`` hold the device and stream exactly as the file has them, and their depth is
  computed on a track of their own (never mixed with a host thread that has the same numbers).
* The profiler's own span (cat ``Trace``, pid ``"Spans"``) and other events on non-numeric
  pseudo-processes are skipped.
* ``flows`` link each runtime/driver call to the kernel or GPU op with the same correlation id.

Performance
-----------
The file is decompressed by a background thread (zlib, lzma, bz2 and zstd release the GIL) while
the main thread decodes what has arrived: the event list is cut at event boundaries into pieces of
a few MB, each decoded with typed msgspec structs (``_Event``, whose ``args`` go straight into a
small typed ``_Args``; msgspec skips every other key, shapes and dtypes stay ``msgspec.Raw`` JSON
text). Each piece is turned into numpy columns at once and its structs are dropped, so no Python
object per event outlives its piece, and decompression, decoding and column building overlap on
two cores. The tables are sorted and linked with numpy at the end.

Modules
-------
:mod:`.events` (typed structs, ``sniff``), :mod:`.reader` (decompression thread), :mod:`.decode`
(``load``: streaming decode, salvage of cut files), :mod:`.columns` (events -> tables),
:mod:`.header` (devices, versions, label, metadata from the header keys).
"""

from __future__ import annotations

from kviewer.io.registry import LoaderSpec
from kviewer.io.torch.decode import load
from kviewer.io.torch.events import LABEL, NAME, sniff

LOADER = LoaderSpec(name=NAME, label=LABEL, priority=50, sniff=sniff, load=load)

__all__ = ["LABEL", "LOADER", "NAME", "load", "sniff"]
