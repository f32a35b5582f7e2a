"""128-d face embeddings with dlib's ResNet face recognition model."""
