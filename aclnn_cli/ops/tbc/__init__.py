"""Gradients over time-batch-channel (TBC) tensors: the Tbc family (families/convolution.py), ConvolutionBackward's
lowering (ops/convolution/) on the layouts the op_api makes of them."""
