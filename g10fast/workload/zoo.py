"""The G10 artifact's model files (frontend/Nets/*.txt) and how G10 loads each of them.

The settings are those the artifact's generated configs use (workloads spec §1, §4): the CNN
family flag (is_resnet / is_inception / is_senet), input_H / input_W (299 for Inception, 224
otherwise), trans_borden for the transformer files, and the folder of results/ and
src/configs/ where one exists (only the 5 models of the paper's evaluation have traces).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from g10fast.errors import InputError
from g10fast.workload.model import Graph


@dataclass(frozen=True)
class ArtifactModel:
    stem: str  # file name in frontend/Nets without ".txt"
    format: str  # "cnn" (PyTorch printout) or "transformer" (operator records)
    family: str | None  # CNN rewiring family; None for AlexNet and the transformers
    input_h: int = 224
    input_w: int = 224
    borden: int | None = None  # trans_borden: tensor ids below it are global
    results: str | None = None  # folder under results/ holding cudnn<B>*.txt, if any
    configs: str | None = None  # folder under src/configs/, if any
    kernels: int | None = None  # kernels per iteration (workloads spec §1.1); None: G10 aborts


def _cnn(stem, family, kernels, hw=224, results=None):
    return ArtifactModel(stem, "cnn", family, hw, hw, None, results, results, kernels)


# Transformers get is_senet 1 from genconfigs as well; it has no effect on them (spec §1.1).
ARTIFACT_MODELS: dict[str, ArtifactModel] = {
    m.stem: m
    for m in (
        _cnn("AlexNet", None, 66),
        _cnn("Inceptionv3", "inception", 929, 299, "Inceptionv3"),
        _cnn("Inceptionv3-O", "inception", None, 299),
        _cnn("ResNet18", "resnet", 186),
        _cnn("ResNet34", "resnet", 330),
        _cnn("ResNet50", "resnet", 449),
        _cnn("ResNet152", "resnet", 1299, results="ResNet152"),
        _cnn("ResNeXt101_32x8d", "resnet", 874),
        _cnn("WResNet50_2", "resnet", 449),
        _cnn("WResNet101_2", "resnet", 874),
        _cnn("SENet16", "senet", 249),
        _cnn("SENet154", "senet", 2319, results="SENet154"),
        ArtifactModel(
            "BERT_Base", "transformer", None, borden=210, results="BERT_Base", configs="BERT", kernels=1369
        ),
        ArtifactModel("VIT", "transformer", None, borden=184, results="VIT", configs="VIT", kernels=1489),
        ArtifactModel("NeRF", "transformer", None, borden=7, kernels=40),
    )
}


def artifact_model(stem: str) -> ArtifactModel:
    try:
        return ARTIFACT_MODELS[stem]
    except KeyError:
        raise InputError(
            f"unknown artifact model {stem!r}; known: " + ", ".join(ARTIFACT_MODELS), param="model"
        ) from None


def load_artifact_graph(nets_dir, stem: str, batch_size: int) -> Graph:
    """Build the Graph of artifact model `stem` from `nets_dir`/<stem>.txt as G10 loads it."""
    m = artifact_model(stem)
    path = Path(nets_dir) / f"{stem}.txt"
    if m.format == "cnn":
        from g10fast.workload.cnn import parse_cnn

        return parse_cnn(path, batch_size, m.input_h, m.input_w, m.family, name=stem)
    from g10fast.workload.transformer import parse_transformer

    return parse_transformer(path, batch_size, m.borden, name=stem)
