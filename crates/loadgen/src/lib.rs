//! loadgen (being written).
