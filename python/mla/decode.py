"""A plan()/run() wrapper in the style serving engines use (FlashInfer's).

plan() makes the split-KV plan of a batch and fills the work list once;
run() launches on the layer's tensors, reusing the plan, the work list, the
workspace and, if given, the output buffers: no allocation per layer once
the buffers are large enough.
"""


def _is_torch(array):
    return type(array).__module__.startswith("torch")


class DecodeWrapper:
    def __init__(self, kernel):
        self.kernel = kernel
        self.info = kernel.info
        self._plan = None
        self._work_list = None
        self._workspace = None

    def plan(self, qo_indptr, kv_indptr, device=None):
        """Plans one batch from host indptrs (arrays or sequences of int32).

        `device`: a torch.device for the work list and workspace when the
        launches take PyTorch tensors on a GPU; host NumPy buffers otherwise.
        """
        self._plan = self.kernel.plan(qo_indptr, kv_indptr)
        info = self._plan.info
        import numpy as np

        host = np.zeros(max(info["work_list_bytes"], 1), np.uint8)
        self._plan.write_work_list(host)
        if device is None or str(device) == "cpu":
            self._work_list = host
            self._workspace = self._bytes(self._workspace, info["workspace_bytes"], None)
        else:
            import torch

            self._work_list = torch.from_numpy(host).to(device)
            self._workspace = self._bytes(self._workspace, info["workspace_bytes"], device)
        return info

    @staticmethod
    def _bytes(buffer, size, device):
        """A byte buffer of at least `size` bytes, reusing `buffer`."""
        size = max(size, 1)
        if buffer is not None and buffer.shape[0] >= size:
            return buffer
        if device is None:
            import numpy as np

            return np.empty(size, np.uint8)
        import torch

        return torch.empty(size, dtype=torch.uint8, device=device)

    def run(self, q, kv, kv_scale, qo_indptr, kv_indptr, out=None, lse=None,
            stream=None):
        """Decodes the planned batch; returns (out, lse).

        out ([T, H, Dv] bf16) and lse ([T, H] float32) are allocated like q
        when not given.
        """
        if self._plan is None:
            raise ValueError("run() before plan(): plan the batch first")
        tokens = self._plan.info["num_tokens"]
        heads, v_dim = self.info["num_heads"], self.info["v_dim"]
        if _is_torch(q):
            import torch

            if out is None:
                out = torch.empty((tokens, heads, v_dim), dtype=torch.bfloat16,
                                  device=q.device)
            if lse is None:
                lse = torch.empty((tokens, heads), dtype=torch.float32,
                                  device=q.device)
        else:
            import numpy as np

            if out is None:
                out = np.empty((tokens, heads, v_dim), np.uint16)
            if lse is None:
                lse = np.empty((tokens, heads), np.float32)
        self.kernel.launch(self._plan, q=q, kv=kv, kv_scale=kv_scale,
                           qo_indptr=qo_indptr, kv_indptr=kv_indptr, out=out,
                           lse=lse, work_list=self._work_list,
                           workspace=self._workspace, stream=stream)
        return out, lse
