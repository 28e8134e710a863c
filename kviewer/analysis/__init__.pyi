"""Names of :mod:`kviewer.analysis`, imported on first use (``lazy_loader.attach_stub``)."""

from . import activity as activity
from . import attach as attach
from . import calltree as calltree
from . import collectives as collectives
from . import compare as compare
from . import critpath as critpath
from . import depgraph as depgraph
from . import devices as devices
from . import fusion as fusion
from . import gpu_metrics as gpu_metrics
from . import graphs as graphs
from . import kinds as kinds
from . import matching as matching
from . import memory as memory
from . import merge as merge
from . import mfu as mfu
from . import model as model
from . import ncu_baseline as ncu_baseline
from . import ncu_view as ncu_view
from . import ranks as ranks
from . import sol as sol
from . import stats as stats
from . import steps as steps
from . import summary as summary
from . import timerange as timerange
from . import whatif as whatif
