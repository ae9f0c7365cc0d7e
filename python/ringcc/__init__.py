"""ringcc from Python: loads ringcc's libnccl.so.2 (see _lib.candidate_paths for where) and
wraps its communicators (Communicator, also Comm: init, collectives, shrink and grow for
elastic jobs). `import ringcc.torch` registers the `ringcc`
torch.distributed backend.
"""

from ._lib import RINGCC_VERSION_CODE
from ._comm import Communicator, NcclError, library, library_path, version

Comm = Communicator  # the short name

__all__ = ["Comm", "Communicator", "NcclError", "RINGCC_VERSION_CODE", "library", "library_path",
           "version"]
