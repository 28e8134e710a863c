"""Names of :mod:`kviewer.session`, imported on first use (``lazy_loader.attach_stub``)."""

from . import analyses as analyses
from . import analysis_cache as analysis_cache
from . import axis_ticks as axis_ticks
from . import colors as colors
from . import compare as compare
from . import details as details
from . import document as document
from . import documents as documents
from . import events as events
from . import filterexpr as filterexpr
from . import format as format
from . import graph_cache as graph_cache
from . import graph_table as graph_table
from . import lanes as lanes
from . import lod as lod
from . import mfu_view as mfu_view
from . import open_trace as open_trace
from . import recorded_tracks as recorded_tracks
from . import table_data as table_data
from . import tables as tables
from . import timeline_cache as timeline_cache
from . import tracks as tracks
from . import viewstate as viewstate
