//! httpd (being written).
