"""Process groups and the tensor-parallel all-reduce dispatch."""

import minitorch as torch  # noqa: F401  (the allreduce_dispatch site launches kernels)

from minisglang.distributed.custom_all_reduce import CustomAllreduce
from minisglang.distributed.pynccl import PyNcclCommunicator


class GroupCoordinator:
    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.pynccl_comm = PyNcclCommunicator(world_size)
        self.ca_comm = CustomAllreduce(world_size)
        self.in_graph_capture = False

    def all_reduce(self, batch) -> None:
        if self.world_size == 1:
            return
        # @site allreduce_dispatch
        if self.in_graph_capture and self.ca_comm.should_custom_ar(batch):
            self.ca_comm.all_reduce(batch)
        else:
            self.pynccl_comm.all_reduce(batch)


_TP: GroupCoordinator | None = None


def initialize_model_parallel(tp_size: int) -> GroupCoordinator:
    global _TP
    _TP = GroupCoordinator(tp_size)
    return _TP


def get_tp_group() -> GroupCoordinator:
    assert _TP is not None, "tensor model parallel group is not initialized"
    return _TP


def tensor_model_parallel_all_reduce(batch) -> None:
    get_tp_group().all_reduce(batch)
