"""Face detection with dlib's HOG frontal face detector."""
