"""Ordinary models nobody here tuned for, run on the portable kernels against PyTorch eager.

Each model uses an op family the zoo never reaches (max pooling, multi-head
attention, group norm, transposed convolution, reflection padding, pixel
shuffle, recurrent cells, top-k / sort / gather / scatter-add, cumsum, pow,
einsum, flip / roll / tril, nonzero with its data-dependent size). Each is
compiled the way users compile (`etmlir.export` -> `to_edge` ->
`to_executorch`), run by `etmlir.runtime`, and compared with eager on the
same inputs. Tolerance: rtol 1e-4, atol 1e-5 for float32 outputs (several
reductions and GEMMs in a row); integer outputs exact.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import etmlir
import etmlir.runtime as rt

RTOL, ATOL = 1e-4, 1e-5


class ResNetBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.conv1, self.bn1 = nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.conv2, self.bn2 = nn.Conv2d(16, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        y = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(x + self.bn2(self.conv2(y)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class TinyViT(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, 4)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 17, dim) * 0.02)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 5)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        x = x + self.mlp(self.norm2(x))
        return self.head(x[:, 0])


class TinyUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 8, 3), nn.GroupNorm(2, 8), nn.SiLU())
        self.pool = nn.AvgPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU())
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.out = nn.Conv2d(16, 12, 1)
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, x):
        d = self.down(x)
        u = self.up(self.mid(self.pool(d)))
        return self.shuffle(self.out(torch.cat([d, u], dim=1)))


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(8, 16)
        self.fc = nn.Linear(16, 3)

    def forward(self, x):  # [T, B, 8], unrolled over T
        h = torch.zeros(x.shape[1], 16)
        for t in range(x.shape[0]):
            h = self.cell(x[t], h)
        return self.fc(h)


class TopKGatherScatter(nn.Module):
    def forward(self, scores, values):
        top, idx = torch.topk(scores, 3, dim=-1)
        ordered, order = torch.sort(scores, dim=-1, descending=True)
        picked = torch.gather(values, -1, idx)
        hist = torch.zeros(scores.shape[0], 8).scatter_add(1, idx, top)
        return top, idx, ordered, order, picked, hist, scores.argmax(-1)


class CumsumPow(nn.Module):
    def forward(self, x):
        c = torch.cumsum(x, dim=1)
        return c, torch.pow(x.abs() + 1, 1.5), torch.pow(2.0, x), x.pow(2).sum(-1).sqrt()


class Einsum(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 6, 5))

    def forward(self, a, b):
        return torch.einsum("bij,bjk->bik", a, b), torch.einsum("bi,ijk->bjk", a[:, :, 0], self.w)


class FlipRollTril(nn.Module):
    def forward(self, x):
        return torch.flip(x, [0, 2]), torch.roll(x, 2, dims=1), torch.tril(x[0]), torch.triu(x[0], 1), x.max(dim=1)


class Nonzero(nn.Module):
    def forward(self, x):
        return torch.nonzero(x > 0.5) * 2, (x > 0).sum()


class ConvNeXtish(nn.Module):
    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 7, padding=3, groups=8)
        self.norm = nn.LayerNorm(8)
        self.pw = nn.Linear(8, 32)
        self.pw2 = nn.Linear(32, 8)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw(self.norm(y)))).permute(0, 3, 1, 2)
        return F.max_pool2d(x + y, 2), torch.clamp(x, min=-0.5).std(dim=1)


def _gen(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


MODELS = {
    "resnet_block_maxpool": (ResNetBlock, lambda: (_gen(2, 3, 32, 32),)),
    "vit_multihead_attention": (TinyViT, lambda: (_gen(2, 3, 16, 16),)),
    "unet_groupnorm_convtranspose_reflectpad_pixelshuffle": (TinyUNet, lambda: (_gen(1, 3, 16, 16),)),
    "gru_cell": (GRUClassifier, lambda: (_gen(5, 2, 8),)),
    "topk_sort_gather_scatter_add": (TopKGatherScatter, lambda: (_gen(4, 8), _gen(4, 8) * 3)),
    "cumsum_pow": (CumsumPow, lambda: (_gen(3, 7),)),
    "einsum": (Einsum, lambda: (_gen(2, 4, 6), _gen(2, 6, 3))),
    "flip_roll_tril": (FlipRollTril, lambda: (_gen(3, 5, 5),)),
    "nonzero_data_dependent_size": (Nonzero, lambda: (_gen(4, 6),)),
    "convnext_depthwise_layernorm_maxpool": (ConvNeXtish, lambda: (_gen(1, 8, 12, 12),)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_eager_on_the_runtime(name):
    cls, make_args = MODELS[name]
    torch.manual_seed(0)
    model = cls().eval()
    args = make_args()
    with torch.no_grad():
        want = model(*args)
    want = [w for w in torch.utils._pytree.tree_leaves(want) if isinstance(w, torch.Tensor)]
    pte = etmlir.to_edge(etmlir.export(model, args)).to_executorch().buffer
    got = rt.load(pte).method("forward")(*args)  # the model's own structure (x.max(dim) a namedtuple)
    got = torch.utils._pytree.tree_leaves(got)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert tuple(g.shape) == tuple(w.shape), f"output {i}: shape {tuple(g.shape)} != eager {tuple(w.shape)}"
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype} != eager {w.dtype}"
        if w.dtype.is_floating_point:
            torch.testing.assert_close(g, w, rtol=RTOL, atol=ATOL, msg=lambda m: f"output {i}: {m}")
        else:
            assert torch.equal(g, w), f"output {i} differs"
