"""Names of :mod:`kviewer.io.rocprof`, imported on first use (``lazy_loader.attach_stub``)."""

from . import common as common
from . import stats as stats
from . import v1_csv as v1_csv
from . import v1_db as v1_db
from . import v2_csv as v2_csv
from . import v3_csv as v3_csv
from . import v3_json as v3_json
