"""The names of fastcep's file formats (the root attribute ``format`` of each HDF5 file), in one
place for the modules that write them and the command line that tells them apart."""

TENSOR_FORMAT = "fastcep-tensor"
MODEL_FORMAT = "fastcep-cp-model"
GLM_MODEL_FORMAT = "fastcep-glm-model"
CHECKPOINT_FORMAT = "fastcep-stream-checkpoint"
CSR_FORMAT = "fastcep-csr"
FIT_CHECKPOINT_FORMAT = "fastcep-fit-checkpoint"
