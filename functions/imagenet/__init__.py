"""ImageNet classification with EfficientNet-Lite0 on onnxruntime."""
