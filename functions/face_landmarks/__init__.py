"""68-point facial landmarks with dlib: eye aspect ratio, closed eyes and head yaw."""
