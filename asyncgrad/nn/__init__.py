"""``asyncgrad.nn``: enough of torch.nn to train real models on the async engine."""

from asyncgrad.nn import functional, init, utils
from asyncgrad.nn.module import Module
from asyncgrad.nn.modules import Linear, MSELoss, ReLU, Sigmoid, Tanh
from asyncgrad.nn.parameter import Parameter

__all__ = [
    "CrossEntropyLoss", "Linear", "MSELoss", "Module", "Parameter", "ReLU", "Sequential", "Sigmoid", "Tanh",
    "functional", "init", "utils",
]

# layers: convolution, pooling, shape layers, embedding, containers
from asyncgrad.nn.container import ModuleDict, ModuleList, ParameterList, Sequential  # noqa: E402
from asyncgrad.nn.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: E402
from asyncgrad.nn.flatten import Embedding, Flatten, Identity, Unflatten  # noqa: E402
from asyncgrad.nn.pooling import AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d  # noqa: E402

__all__ += ["AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "Conv1d", "Conv2d", "Conv3d",
           "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Embedding", "Flatten", "Identity",
           "MaxPool1d", "MaxPool2d", "ModuleDict", "ModuleList", "ParameterList", "Unflatten"]

# layers: normalisation, activations, dropout, losses, attention, recurrent layers
from asyncgrad.nn.activation import (  # noqa: E402
    CELU,
    ELU,
    GELU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU6,
    SiLU,
    Softmax,
    Softplus,
)
from asyncgrad.nn.dropout import Dropout  # noqa: E402
from asyncgrad.nn.loss import (  # noqa: E402
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    NLLLoss,
    SmoothL1Loss,
)
from asyncgrad.nn.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm  # noqa: E402
from asyncgrad.nn.rnn import GRU, LSTM, RNN  # noqa: E402
from asyncgrad.nn.transformer import MultiheadAttention, TransformerEncoderLayer  # noqa: E402

__all__ += [
    "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "CELU", "Dropout", "ELU", "GELU",
    "GRU", "GroupNorm", "Hardsigmoid", "Hardswish", "Hardtanh", "HuberLoss", "KLDivLoss", "L1Loss", "LSTM",
    "LayerNorm", "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish", "MultiheadAttention", "NLLLoss", "PReLU", "RNN",
    "ReLU6", "SELU", "SiLU", "SmoothL1Loss", "Softmax", "Softplus", "TransformerEncoderLayer",
]

# ops-misc: instance normalisation
from asyncgrad.nn.normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: E402

__all__ += ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]

# ops-misc: activation layers, CTCLoss
from asyncgrad.nn.activation import (  # noqa: E402
    GLU,
    Hardshrink,
    RReLU,
    Softmin,
    Softshrink,
    Softsign,
    Tanhshrink,
    Threshold,
)
from asyncgrad.nn.loss import CTCLoss  # noqa: E402
from asyncgrad.nn.rnn import GRUCell, LSTMCell, RNNCell  # noqa: E402

__all__ += ["CTCLoss", "GLU", "GRUCell", "Hardshrink", "LSTMCell", "RNNCell", "RReLU",
            "Softmin", "Softshrink", "Softsign", "Tanhshrink", "Threshold"]

# opsB: convolution layers above, margin/embedding/likelihood losses
from asyncgrad.nn.loss import (  # noqa: E402
    CosineEmbeddingLoss,
    GaussianNLLLoss,
    HingeEmbeddingLoss,
    MarginRankingLoss,
    MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss,
    MultiMarginLoss,
    PoissonNLLLoss,
    SoftMarginLoss,
    TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)

__all__ += ["CosineEmbeddingLoss", "GaussianNLLLoss", "HingeEmbeddingLoss", "MarginRankingLoss", "MultiLabelMarginLoss",
            "MultiLabelSoftMarginLoss", "MultiMarginLoss", "PoissonNLLLoss", "SoftMarginLoss", "TripletMarginLoss",
            "TripletMarginWithDistanceLoss"]

# opsB: convolution/pixel-shuffle/distance/bilinear/normalisation/dropout layers
from asyncgrad.nn.bilinear import Bilinear  # noqa: E402
from asyncgrad.nn.distance import CosineSimilarity, PairwiseDistance  # noqa: E402
from asyncgrad.nn.dropout import AlphaDropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout  # noqa: E402
from asyncgrad.nn.normalization import LocalResponseNorm, RMSNorm  # noqa: E402
from asyncgrad.nn.pixelshuffle import ChannelShuffle, PixelShuffle, PixelUnshuffle  # noqa: E402

__all__ += ["AlphaDropout", "Bilinear", "ChannelShuffle", "CosineSimilarity", "Dropout1d", "Dropout2d", "Dropout3d",
            "FeatureAlphaDropout", "LocalResponseNorm", "PairwiseDistance", "PixelShuffle", "PixelUnshuffle", "RMSNorm"]

# opsB: 3-D and adaptive pooling layers
from asyncgrad.nn.pooling import (  # noqa: E402
    AdaptiveAvgPool1d,
    AdaptiveAvgPool3d,
    AdaptiveMaxPool1d,
    AdaptiveMaxPool2d,
    AdaptiveMaxPool3d,
    AvgPool3d,
    MaxPool3d,
)

__all__ += ["AdaptiveAvgPool1d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d",
            "AvgPool3d", "MaxPool3d"]

# opsB: im2col/col2im, max unpooling and upsampling layers
from asyncgrad.nn.fold import Fold, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d, Unfold  # noqa: E402
from asyncgrad.nn.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: E402

__all__ += ["Fold", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "Unfold", "Upsample", "UpsamplingBilinear2d",
            "UpsamplingNearest2d"]

# opsB: bags of embeddings
from asyncgrad.nn.embedding_bag import EmbeddingBag  # noqa: E402

__all__ += ["EmbeddingBag"]

# opsB: fractional max pooling
from asyncgrad.nn.fractional import FractionalMaxPool2d, FractionalMaxPool3d  # noqa: E402

__all__ += ["FractionalMaxPool2d", "FractionalMaxPool3d"]
